#!/usr/bin/env python3
"""sbx's OSWorld image (images/desktop/build.sh --osworld) under OSWorld's own loop: the Python
SDK's DesktopEnv on native sandboxes of the imported image, with tasks in OSWorld's format
that use what OSWorld's tasks assume of its VM: the user `user` (uid 1000, ~/Desktop) running
the desktop at 1920x1080, sudo with {CLIENT_PASSWORD}, gsettings with dconf on the session bus
at /run/user/1000/bus, gnome-terminal on Ctrl+Alt+T read back through /terminal, PulseAudio's
volume, the apps' config files from their first run; a Chrome task reported as needing Chrome.
Each task scores 0 untouched and 1 once a scripted agent solved it. Then the same image in a
private dockerd (or podman) under the docker provider: the machine's checks again (the user,
the size, sudo, the apps' files), so the image works on both providers.

  test_osworld_image.py SBX IMAGE_TAR [--build-only]
"""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
sys.path.insert(0, os.path.join(HERE, "..", "desktop"))
sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))
sys.path.insert(0, HERE)

from harness import Fail, Skip, check, main, wait_for  # noqa: E402
from test_desktop_image import SCRIPTS, image, on_engine  # noqa: E402

TAG = "sbx-osworld:test"
PASSWORD = "osworld-pw"  # not the default: the placeholder must carry the configured one


def sh(cmd):
    return {"type": "execute", "parameters": {"command": cmd, "shell": True}}


def cmd_result(cmd):
    return {"type": "vm_command_line", "command": cmd, "shell": True}


def include(*words):
    return {"type": "rule", "rules": {"include": list(words), "exclude": []}}


def task(tid, config, func, result, expected, apps=("os",)):
    return {"id": tid, "snapshot": "os", "instruction": tid, "source": "test",
            "related_apps": list(apps), "proxy": False, "config": config,
            "evaluator": {"func": func, "result": result, "expected": expected}}


def score_after(env, what, timeout=20):
    """evaluate() until 1 (the agent's keys take a moment to land), or the last score."""
    end = time.monotonic() + timeout
    while True:
        s = env.evaluate()
        if s == 1.0 or time.monotonic() > end:
            check(s == 1.0, "%s: solved scores 1, got %r" % (what, s))
            return
        time.sleep(0.3)


def machine(env):
    """The VM's shape: user, home, Desktop, screen, python, sudo with the task's password."""
    def run(cmd):
        r = env.osworld("POST", "/execute", {"command": cmd, "shell": True})
        return r["returncode"], r["output"].strip(), r["error"].strip()
    t = task("machine", [sh("test \"$(id -un)\" = user && test -d ~/Desktop && "
                            "echo {CLIENT_PASSWORD} | sudo -S sh -c 'id -u > /tmp/by-sudo'")],
             "exact_match", cmd_result("stat -c %U /tmp/by-sudo; cat /tmp/by-sudo"),
             {"type": "rule", "rules": {"expected": "root\n0\n"}})
    env.reset(task_config=t)
    check(env.evaluate() == 1.0, "setup ran as user with sudo and the configured password")
    code, out, _ = run("id -un; id -u; echo $HOME; pwd; groups")
    check(out.split()[:4] == ["user", "1000", "/home/user", "/home/user"] and "sudo" in out,
          "OSWorld's API runs as user 1000 in /home/user: %r" % out)
    w, h = env.osworld("POST", "/screen_size")["width"], env.osworld(
        "POST", "/screen_size")["height"]
    check((w, h) == (1920, 1080), "1920x1080 (the image's default): %r" % ((w, h),))
    check(run("python -c 'import pyautogui; print(pyautogui.size())'")[1] ==
          "Size(width=1920, height=1080)", "python with pyautogui")
    code, out, err = run("echo %s | sudo -S id -u" % PASSWORD)
    check((code, out) == (0, "0"), "sudo -S with the password: root (%r %r %r)" % (code, out, err))
    code, out, err = run("printf '%s\\nline two\\n' | sudo -S cat" % PASSWORD)
    check(out == "line two", "sudo -S: the rest of stdin is the command's: %r %r" % (out, err))
    t0 = time.monotonic()
    code, out, err = run("echo wrong | sudo -S id -u")
    check(code == 1 and "incorrect password" in err and out == "",
          "a wrong password is refused: %r %r %r" % (code, out, err))
    check(time.monotonic() - t0 >= 1, "after sudo's delay")
    code, out, err = run("echo %s | sudo -S -u nobody id -un" % PASSWORD)
    check(out == "nobody", "sudo -u: %r %r" % (out, err))
    code, out, err = run("sudo -n true")
    check(code == 1 and "password is required" in err, "sudo -n: %r" % err)
    code, out, err = run("echo %s | sudo -S sh -c 'exit 7'" % PASSWORD)
    check(code == 7, "sudo passes the exit status: %r" % code)
    # nobody is not in the sudo group: refused whatever the password
    code, out, err = run("echo {0} | sudo -S setpriv --reuid=65534 --regid=65534 "
                         "--clear-groups sh -c 'echo {0} | sudo -S true'".format(PASSWORD))
    check(code != 0 and "sudoers" in out + err, "a user outside sudo is refused: %r" % (out + err))
    files = {"~/.config/libreoffice/4/user/registrymodifications.xcu": "LibreOffice",
             "~/.config/GIMP": "GIMP", "~/.config/vlc/vlcrc": "VLC",
             "~/.thunderbird/profiles.ini": "Thunderbird"}
    for f, app in files.items():
        check(run("test -e %s" % f)[0] == 0, "%s's config from its first run: %s" % (app, f))
    print("ok   the machine: user 1000 in /home/user, 1920x1080, python + pyautogui, sudo "
          "(password, stdin, -u, -n, exit status, refusals), the apps' config files", flush=True)


def gsettings_terminal(env):
    """Ctrl+Alt+T, a command typed into gnome-terminal, scored with gsettings; /terminal."""
    key = "org.gnome.desktop.interface text-scaling-factor"
    t = task("gsettings", [sh("gsettings reset " + key)], "check_include_exclude",
             cmd_result("gsettings get " + key), include("1.25"))
    env.require_terminal = True
    obs = env.reset(task_config=t)
    check(env.evaluate() == 0.0, "gsettings untouched: 0")
    check(obs["terminal"] is None, "no terminal yet: %r" % obs["terminal"])
    env.step("pyautogui.hotkey('ctrl', 'alt', 't')", pause=0.2)
    wait_for(lambda: any("terminal" in (w.cls + w.instance).lower()
                         for w in env.sandbox.desktop.windows()) or None,
             "gnome-terminal's window after Ctrl+Alt+T", 30)
    # the shell's prompt first: keys typed before it would be lost
    wait_for(lambda: "$" in (env.osworld("GET", "/terminal").get("output") or "") or None,
             "the terminal's prompt through /terminal", 30)
    env.step("pyautogui.typewrite('gsettings set %s 1.25; echo done-$((6*7))\\n')" % key,
             pause=0.2)
    score_after(env, "gsettings through gnome-terminal")
    out = wait_for(lambda: (lambda o: o if o and "done-42" in o else None)(
        env.osworld("GET", "/terminal").get("output")), "the command's output in /terminal", 15)
    check("gsettings set" in out, "/terminal has the typed command too: %r" % out[-300:])
    obs, _, _, _ = env.step("WAIT", pause=0)
    check("done-42" in (obs["terminal"] or ""), "the terminal observation: %r" % obs["terminal"])
    check(env.osworld("POST", "/execute", {"command": "test -s ~/.config/dconf/user",
                                           "shell": True})["returncode"] == 0,
          "dconf wrote the user's database")
    env.require_terminal = False
    print("ok   Ctrl+Alt+T -> gnome-terminal, a typed gsettings change scored 0 -> 1 through "
          "dconf, /terminal reads the terminal (and the observation has it)", flush=True)


def volume(env):
    """PulseAudio on the session: a volume task."""
    t = task("volume", [sh("pactl set-sink-volume @DEFAULT_SINK@ 100%")],
             "check_include_exclude", cmd_result("pactl get-sink-volume @DEFAULT_SINK@"),
             include("/  40% /"))
    env.reset(task_config=t)
    check(env.evaluate() == 0.0, "volume untouched: 0")
    env.step("import subprocess; subprocess.run(['pactl', 'set-sink-volume', "
             "'@DEFAULT_SINK@', '40%'])", pause=0)
    score_after(env, "the volume set to 40%")
    print("ok   PulseAudio: a volume task 0 -> 1", flush=True)


def needs_chrome(env):
    from sbx.desktop_env import SetupError
    t = task("chrome", [{"type": "launch", "parameters": {
        "command": ["google-chrome", "--remote-debugging-port=1337"]}}],
        "exact_match", cmd_result("true"), {"type": "rule", "rules": {"expected": ""}},
        apps=("chrome",))
    try:
        env.reset(task_config=t)
    except SetupError as e:
        check(e.step == "related_apps" and "Google Chrome" in e.message,
              "the task is reported as needing Chrome: %s" % e)
    else:
        raise Fail("a Chrome task on an image without Chrome did not say so")
    print("ok   a task needing Chrome says so before its setup runs", flush=True)


def docker(new_server, tar):
    import sbx
    from sbx.desktop_env import DesktopEnv

    def body(s, ref, kind):
        client = sbx.Client("127.0.0.1:%d" % s.port, s.key)
        with DesktopEnv(provider_name="docker", snapshot_name=ref, client=client,
                        client_password=PASSWORD, memory="2Gi", cpu="2",
                        cache_dir=os.path.join(s.tmp, "cache")) as env:
            machine(env)
        print("ok   the OSWorld image on docker (%s)" % kind, flush=True)
    on_engine(new_server, tar, TAG, body, "osworld-docker")


def test(new_server):
    if os.geteuid() != 0:
        raise Skip("needs root (mmdebstrap, sandboxes)")
    tar = image(sys.argv[2], TAG, ["--osworld", "--password", PASSWORD],
                SCRIPTS + [os.path.join(ROOT, "images", "desktop", "osworld-setup.sh")])
    if sys.argv[3:] == ["--build-only"]:
        return
    import sbx
    from sbx.desktop_env import DesktopEnv
    s = new_server(config_text='providers = { supported = ["native"]; default = "native"; };\n',
                   tag="osworld-img")
    r = subprocess.run([s.sbx, "image", "import", "--state-dir", s.state, tar],
                       capture_output=True, text=True, timeout=900)
    check(r.returncode == 0, "sbx image import: %r" % r)
    s.start()
    client = sbx.Client("127.0.0.1:%d" % s.port, s.key)
    with DesktopEnv(snapshot_name=TAG, client=client, client_password=PASSWORD,
                    memory="2Gi", cpu="2", cache_dir=os.path.join(s.tmp, "cache")) as env:
        machine(env)
        gsettings_terminal(env)
        volume(env)
        needs_chrome(env)
    left = [x for x in client.list() if x.metadata.get("sbx-desktop-env")]
    check(not left, "the environments' sandboxes are gone: %r" % left)
    check(s.stop() == 0, "clean stop")
    docker(new_server, tar)


if __name__ == "__main__":
    main(test)
