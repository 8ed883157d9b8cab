#!/usr/bin/env python3
"""The Python SDK against a real `sbx serve`: the scenarios the published JS SDK's compatibility
tests run (tests/compat/scenarios.test.mjs), plus what this SDK adds (streamed transfers, code
contexts, errors carrying {code, message}).

  test_sdk.py SBX_BINARY PROVIDER       (native | docker; docker runs under engine.py)
"""
import io
import os
import shutil
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "integration", "server"))

import sbx  # noqa: E402
from harness import Server  # noqa: E402

SBX_BIN = ""
PROVIDER = "native"
IMAGE = "host"
SERVER = None


def config_for(provider):
    if provider == "docker":
        return ('providers = { supported = ["docker"]; default = "docker";\n'
                '  docker = { socket = "%s"; network = "none"; cgroup_parent = "%s"; }; };\n'
                % (os.environ["SBX_DOCKER_SOCKET"], os.environ["SBX_DOCKER_CGROUP"]))
    return 'providers = { supported = ["native"]; default = "native"; };\n'


class SdkTest(unittest.TestCase):
    client = None
    made = []

    @classmethod
    def setUpClass(cls):
        cls.client = sbx.Client("127.0.0.1:%d" % SERVER.port, SERVER.key)

    @classmethod
    def tearDownClass(cls):
        for s in cls.made:
            s.kill()

    def make(self, **kw):
        kw.setdefault("memory", "512Mi")
        kw.setdefault("cpu", "1")
        kw.setdefault("metadata", {"suite": "sdk-%d" % os.getpid()})
        s = self.client.create(IMAGE, provider=PROVIDER, **kw)
        self.made.append(s)
        return s

    # ---- lifecycle
    def test_lifecycle(self):
        s = self.make(metadata={"suite": "sdk", "role": "lifecycle"})
        info = s.info()
        self.assertEqual(info.id, s.id)
        self.assertEqual(info.state, "Running")
        self.assertEqual(info.metadata["role"], "lifecycle")
        self.assertIsNotNone(info.expires_at)
        again = self.client.connect(s.id)
        self.assertEqual(again.info().id, s.id)
        s.kill()
        with self.assertRaises(sbx.NotFoundError) as cm:
            s.info()
        self.assertIn("NOT_FOUND", cm.exception.code)
        self.assertEqual(cm.exception.status, 404)
        self.assertTrue(cm.exception.request_id)
        s.kill()  # already gone: fine

    def test_no_expiry(self):
        s = self.make(timeout=None)
        self.assertIsNone(s.info().expires_at)

    def test_errors_carry_code_and_message(self):
        with self.assertRaises(sbx.SbxError) as cm:
            self.client.create(IMAGE, provider=PROVIDER, entrypoint=[], timeout=5)
        self.assertEqual(cm.exception.status, 400)
        self.assertTrue(cm.exception.code and cm.exception.message)
        bad = sbx.Client("127.0.0.1:%d" % SERVER.port, "wrong-key")
        with self.assertRaises(sbx.AuthError):
            bad.list()
        with self.assertRaises(sbx.ConnectionFailed):
            sbx.Client("127.0.0.1:1", "k", timeout=2).health()

    def test_pause_resume_renew(self):
        s = self.make()
        s.pause()
        self.assertEqual(s.state, "Paused")
        s.resume()
        self.assertEqual(s.state, "Running")
        self.assertEqual(s.commands.run("echo back").stdout, ["back"])
        expires = s.renew(1800)
        left = time.mktime(time.strptime(expires[:19], "%Y-%m-%dT%H:%M:%S")) - time.mktime(
            time.gmtime())
        self.assertTrue(1700 < left <= 1800, "renewed to about 30 minutes: %s" % expires)
        with self.assertRaises(sbx.ConflictError):
            s.resume()  # not paused

    def test_list_filters(self):
        s = self.make(metadata={"suite": "sdk-list-%d" % os.getpid(), "role": "listed"})
        got = self.client.list(metadata={"suite": "sdk-list-%d" % os.getpid()},
                               states=["Running"])
        self.assertEqual([i.id for i in got], [s.id])
        self.assertEqual(self.client.list(metadata={"suite": "sdk-list-%d" % os.getpid()},
                                          states=["Paused"]), [])
        info = s.set_metadata({"role": None, "extra": "1"})
        self.assertNotIn("role", info.metadata)
        self.assertEqual(info.metadata["extra"], "1")

    # ---- commands
    def test_commands_stream_and_exit(self):
        s = self.make()
        seen = []
        ex = s.commands.run("for i in 1 2 3; do echo line$i; sleep 0.05; done; echo oops >&2",
                            on_stdout=seen.append)
        self.assertEqual(seen, ["line1", "line2", "line3"])
        self.assertEqual(ex.stdout, ["line1", "line2", "line3"])
        self.assertEqual(ex.stderr, ["oops"])
        self.assertEqual(ex.exit_code, 0)
        self.assertTrue(ex.id)
        bad = s.commands.run("exit 3")
        self.assertEqual(bad.exit_code, 3)
        with self.assertRaises(sbx.CommandError) as cm:
            s.commands.run("echo nope >&2; exit 4", check=True)
        self.assertEqual(cm.exception.exit_code, 4)
        env = s.commands.run("echo $FOO; pwd", envs={"FOO": "bar"}, cwd="/tmp")
        self.assertEqual(env.stdout, ["bar", "/tmp"])

    def test_commands_background_and_interrupt(self):
        s = self.make()
        ex = s.commands.run("echo start; sleep 0.3; echo done", background=True)
        self.assertTrue(ex.id)
        st = s.commands.wait(ex.id)
        self.assertEqual(st.exit_code, 0)
        text, cursor = s.commands.logs(ex.id)
        self.assertEqual(text, "start\ndone\n")
        self.assertEqual(s.commands.logs(ex.id, cursor)[0], "")
        long = s.commands.run("sleep 30", background=True)
        s.commands.interrupt(long.id)
        self.assertFalse(s.commands.wait(long.id, timeout=10).running)

    # ---- files
    def test_files(self):
        s = self.make()
        s.files.mkdir("/tmp/demo/sub", mode=755)
        s.files.write("/tmp/demo/hello.txt", "Hello World", mode=644)
        s.files.write("/tmp/demo/sub/b.txt", b"bee")
        self.assertEqual(s.files.read_text("/tmp/demo/hello.txt"), "Hello World")
        self.assertEqual(s.files.read("/tmp/demo/hello.txt", range="bytes=6-10"), b"World")
        info = s.files.info("/tmp/demo/hello.txt")["/tmp/demo/hello.txt"]
        self.assertEqual((info.size, info.mode), (11, 644))
        found = sorted(f.path for f in s.files.search("/tmp/demo", "*.txt"))
        self.assertEqual(found, ["/tmp/demo/hello.txt", "/tmp/demo/sub/b.txt"])
        s.files.move("/tmp/demo/sub/b.txt", "/tmp/demo/c.txt")
        s.files.replace("/tmp/demo/c.txt", "bee", "sea")
        self.assertEqual(s.files.read("/tmp/demo/c.txt"), b"sea")
        s.files.chmod("/tmp/demo/c.txt", 600)
        self.assertEqual(s.files.info("/tmp/demo/c.txt")["/tmp/demo/c.txt"].mode, 600)
        s.files.remove("/tmp/demo/c.txt")
        self.assertFalse(s.files.exists("/tmp/demo/c.txt"))
        with self.assertRaises(sbx.NotFoundError):
            s.files.info("/tmp/demo/c.txt")
        names = sorted(os.path.basename(f.path) for f in s.files.list("/tmp/demo"))
        self.assertEqual(names, ["hello.txt", "sub"])
        s.files.rmdir("/tmp/demo")
        self.assertEqual(s.commands.run("test -e /tmp/demo; echo $?").stdout, ["1"])

    def test_transfers_streamed(self):
        """64 MiB up and down through the router, from and to files, compared byte for byte."""
        s = self.make()
        tmp = tempfile.mkdtemp(prefix="sbx-sdk-")
        try:
            src = os.path.join(tmp, "up.bin")
            with open(src, "wb") as f:
                for i in range(64):
                    f.write(os.urandom(1 << 20))
            s.files.upload(src, "/tmp/big.bin", mode=600)
            out = s.commands.run("stat -c '%s %a' /tmp/big.bin").stdout
            self.assertEqual(out, ["%d 600" % (64 << 20)])
            dst = os.path.join(tmp, "down.bin")
            self.assertEqual(s.files.download("/tmp/big.bin", dst), 64 << 20)
            with open(src, "rb") as a, open(dst, "rb") as b:
                self.assertTrue(a.read() == b.read(), "downloaded bytes differ")
            self.assertEqual([x for x in os.listdir(tmp) if "partial" in x], [])
            buf = io.BytesIO()
            s.files.download("/tmp/big.bin", buf)
            self.assertEqual(len(buf.getvalue()), 64 << 20)
            s.files.upload_many([(b"one", "/tmp/m/1"), (io.BytesIO(b"two"), "/tmp/m/2")])
            self.assertEqual(s.commands.run("cat /tmp/m/1 /tmp/m/2").stdout, ["onetwo"])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    # ---- code
    def test_code_contexts(self):
        if PROVIDER != "native":
            self.skipTest("the docker test image (BusyBox) has no python")
        s = self.make()
        ctx = s.code.create_context("python")
        r = s.code.run("x = 40\nprint('hi')", context=ctx)
        self.assertEqual("".join(r.stdout), "hi\n")
        r = s.code.run("x + 2", context=ctx)
        self.assertEqual(r.results[0].get("text"), "42")
        r = s.code.run("1/0", context=ctx)
        self.assertEqual(r.error["ename"], "ZeroDivisionError")
        self.assertIn(ctx.id, [c.id for c in s.code.contexts("python")])
        sh = s.code.create_context("bash")
        s.code.run("cd /tmp; export Z=9", context=sh)
        self.assertEqual(s.code.run("echo $Z $PWD", context=sh).stdout, ["9 /tmp"])
        s.code.delete_context(ctx)
        with self.assertRaises(sbx.NotFoundError):
            s.code.run("1", context=ctx.id)

    def test_endpoint_and_logs(self):
        s = self.make(entrypoint=["sh", "-c", "echo entry-was-here; exec sleep 600"])
        ep = s.endpoint(44772)
        self.assertIn("/sandboxes/%s/proxy/44772" % s.id, ep["endpoint"])
        for _ in range(50):
            if "entry-was-here" in s.logs():
                break
            time.sleep(0.1)
        self.assertIn("entry-was-here", s.logs())


    # ---- desktop (the host image has Xvnc when scripts/deps.sh installed the desktop packages)
    def test_desktop(self):
        # (PROVIDER is set in main(), after the class is made: checked here, not in a decorator)
        if PROVIDER != "native" or not shutil.which("Xvnc"):
            self.skipTest("the desktop needs Xvnc in the image (the native host image here)")
        s = self.make(desktop="800x600", memory="1Gi")
        d = s.desktop
        st = d.status()
        self.assertEqual((st.state, st.width, st.height), ("running", 800, 600))
        png = d.screenshot(region=(0, 0, 64, 32))
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
        self.assertEqual(int.from_bytes(png[16:20], "big"), 64)  # IHDR width
        self.assertEqual(d.screenshot(format="jpeg", quality=40)[:2], b"\xff\xd8")
        d.move(100, 200)
        self.assertEqual(d.cursor(), (100, 200))
        r = d.act({"action": "cursor_position"})
        self.assertEqual(r.cursor, (100, 200))
        z = d.act({"action": "zoom", "region": [0, 0, 40, 30]})
        self.assertEqual(int.from_bytes(z.image[16:20], "big"), 40)
        rs = d.act_all([{"action_type": "MOVE_TO", "parameters": {"x": 5, "y": 6}},
                        {"action_type": "DONE"}])
        self.assertTrue(rs[1].done and d.cursor() == (5, 6))
        with self.assertRaises(sbx.SbxError) as e:
            d.act({"action_type": "CLICK", "parameters": {"x": 10 ** 9, "y": 1}})
        self.assertEqual(e.exception.status, 400)
        self.assertIn("`x`", e.exception.message)
        d.set_clipboard("clip é")
        self.assertEqual(d.clipboard(), "clip é")
        self.assertEqual(d.windows(), [])
        d.record_start(fps=5)
        time.sleep(0.5)
        self.assertEqual(d.record_stop()[4:8], b"ftyp")
        self.assertIn("desktop-frame", d.accessibility_tree())
        url = d.view_url(ttl=120)
        self.assertRegex(url, r"^http://[^/]+/desktop/view/%s#token=[0-9a-f]{64}$" % s.id)
        with urllib.request.urlopen(url.split("#")[0], timeout=30) as page:
            self.assertIn(b"/desktop/static/view.js", page.read())
        with self.assertRaises(sbx.SbxError) as e:
            d.view_url(ttl=1)
        self.assertEqual(e.exception.status, 400)
        self.assertEqual(d.stop().state, "stopped")
        with self.assertRaises(sbx.ConflictError):
            d.screenshot()
        self.assertEqual(d.start(640, 480, window_manager=False).height, 480)
        self.assertEqual(d.screen_size(), (640, 480))


def main():
    global SBX_BIN, PROVIDER, IMAGE, SERVER
    SBX_BIN, PROVIDER = sys.argv[1], sys.argv[2]
    IMAGE = os.environ.get("SBX_IMAGE", "host") if PROVIDER == "docker" else "host"
    SERVER = Server(SBX_BIN, config_text=config_for(PROVIDER), tag="sdk-" + PROVIDER)
    SERVER.start()
    try:
        prog = unittest.main(argv=[sys.argv[0], "-v"], exit=False)
        ok = prog.result.wasSuccessful()
        if not ok:
            print("---- server log ----\n" + SERVER.log())
    finally:
        SERVER.cleanup()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
