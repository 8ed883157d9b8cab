#!/usr/bin/python3
"""Run a command with the FAKE Kubernetes API server up (fake_apiserver.py, started the way
test_kube_fake.py starts it): the kubernetes run of the OpenSandbox JS SDK scenarios
(tests/compat/run.sh). Sets SBX_KUBECONFIG (its kubeconfig), SBX_KUBE_EXECD_IMAGE (an image
holding the static sbx-execd), SBX_IMAGE (an image that is this host's root: the scenarios'
commands find bash, tail, python...) for the command, then stops the fake and removes every
pod, network namespace and file it made.

  /usr/bin/python3 fake_env.py SBX_EXECD_STATIC -- COMMAND [ARG...]

Exit: the command's; 77 (skip) when the fake cannot run here (not root, no
python3-kubernetes, no openssl)."""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main(argv):
    if len(argv) < 4 or argv[2] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("skip: the fake kubelet needs root (network namespaces)")
        return 77
    try:
        import kubernetes  # noqa: F401
    except ImportError:
        print("skip: python3-kubernetes is not installed (the fake validates with it)")
        return 77
    if not shutil.which("openssl"):
        print("skip: no openssl")
        return 77
    from test_kube_fake import BASE, Fake  # noqa: E402 - after the checks
    fake = Fake(argv[1])
    try:
        fake.start()
        env = dict(os.environ, SBX_KUBECONFIG=fake.kubeconfig,
                   SBX_KUBE_EXECD_IMAGE="sbx-execd:test", SBX_IMAGE=BASE)
        rc = subprocess.call(argv[3:], env=env)
        if rc not in (0, 77):
            print("---- fake API server log ----\n" + fake.log())
        return rc
    finally:
        fake.teardown()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
