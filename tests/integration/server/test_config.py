#!/usr/bin/env python3
"""The config file: bad files stop the server at startup with a message naming the problem;
limits and provider settings take effect (max_sandboxes -> 429, a missing execd -> a Failed
sandbox and a 500 {code,message}, never a hang)."""
import subprocess

from harness import check, main


BAD = [
    ("bogus = 1;", "unknown key `bogus`"),
    ("server = { lisen = \"127.0.0.1:1\"; };", "server.lisen"),
    ("providers = { supported = [\"process\", \"process\"]; };", "listed twice"),
    ("providers = { supported = [\"nosuch\"]; };", "unknown provider `nosuch`"),
    ("providers = { supported = [\"process\"]; default = \"other\"; };",
     "not in the supported set"),
    ("limits = { max_timeout_seconds = 5; };", ">= 60"),
    ("server = {", "line"),
]


def bad_configs(new_server):
    for text, needle in BAD:
        s = new_server(config_text=text, tag="bad")
        rc = s.start(expect_fail=True)
        check(rc == 1, "%r: exit status %d" % (text, rc))
        check(needle in s.log(), "%r: log names %r: %s" % (text, needle, s.log()))


NATIVE_BAD = [
    ('upper = "ram";', "providers.native.upper"),
    ('upper_size = "lots";', "providers.native.upper_size"),
    ("upper = 5;", "providers.native.upper must be a string"),
    ('network = ["bridge"];', "providers.native.network must be a string"),
    ('allowed_host_paths = "/srv";', "allowed_host_paths must be a list"),
    ('allowed_host_paths = ["relative/dir"];', "absolute path"),
    ('allowed_host_paths = ["/nonexistent-sbx-test-prefix"];', "nonexistent-sbx-test-prefix"),
    ("netns_pool = -1;", "providers.native.netns_pool must be an integer from 0 to 64"),
    ("netns_pool = 65;", "providers.native.netns_pool must be an integer from 0 to 64"),
    ('netns_pool = "4";', "providers.native.netns_pool must be an integer from 0 to 64"),
    ("leaf_size = 0;", "providers.native.leaf_size must be an integer from 1 to 1023"),
    ("leaf_size = 1024;", "providers.native.leaf_size must be an integer from 1 to 1023"),
    ('leaf_size = "2";', "providers.native.leaf_size must be an integer from 1 to 1023"),
]


def native_settings(new_server):
    """The native provider's storage settings are checked at startup (skipped without it)."""
    for text, needle in NATIVE_BAD:
        s = new_server(config_text='providers = { supported = ["native"]; default = "native";\n'
                                   '  native = { %s }; };' % text, tag="bad-native")
        rc = s.start(expect_fail=True)
        if "unknown provider `native`" in s.log():
            return
        check(rc == 1, "%r: exit status %d" % (text, rc))
        check(needle in s.log(), "%r: log names %r: %s" % (text, needle, s.log()))


def limits(new_server):
    s = new_server(config_text='providers = { supported = ["process"]; default = "process"; };\n'
                               "limits = { max_sandboxes = 1; max_timeout_seconds = 600; };")
    s.start()
    r = s.create()
    check(r.status == 202, "first create: %r" % r)
    r2 = s.create()
    check(r2.status == 429 and r2.json()["code"] == "SANDBOX::LIMIT_EXCEEDED", "limit: %r" % r2)
    r3 = s.create(timeout=601)
    check(r3.status == 400, "timeout over the configured max: %r" % r3)
    check(s.request("DELETE", "/v1/sandboxes/" + r.json()["id"]).status == 204, "delete")
    check(s.stop() == 0, "clean stop")


def missing_execd(new_server):
    s = new_server(config_text='providers = { supported = ["process"]; default = "process";\n'
                               '  process = { execd = "/nonexistent/sbx-execd"; }; };')
    s.start()
    r = s.create()
    check(r.status == 500 and r.json()["code"] == "SANDBOX::SANDBOX_START_FAILED" and
          "/nonexistent/sbx-execd" in r.json()["message"], "failed create: %r" % r)
    items = s.request("GET", "/v1/sandboxes?state=Failed").json()["items"]
    check(len(items) == 1 and items[0]["status"]["reason"] == "PROVISIONING_ERROR",
          "the failed sandbox is listed: %r" % items)
    check(s.request("DELETE", "/v1/sandboxes/" + items[0]["id"]).status == 204, "delete it")
    check(s.stop() == 0, "clean stop")


def usage_errors(new_server):
    s = new_server(tag="usage")
    for argv in (["--bogus"], ["--listen"], ["extra"]):
        r = subprocess.run([s.sbx, "serve"] + argv, capture_output=True, text=True, timeout=30)
        check(r.returncode == 2 and r.stderr.startswith("sbx serve: "), "%r: %r" % (argv, r))
    r = subprocess.run([s.sbx, "serve", "--listen", "nonsense", "--state-dir", s.state],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 1 and "listen address" in r.stderr, "bad listen: %r" % r)


def test(new_server):
    usage_errors(new_server)
    bad_configs(new_server)
    native_settings(new_server)
    limits(new_server)
    missing_execd(new_server)


if __name__ == "__main__":
    main(test)
