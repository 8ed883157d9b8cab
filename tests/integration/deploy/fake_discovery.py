"""A FAKE Kubernetes API server for `kubectl apply --dry-run=client` only: kubectl maps each
manifest's kind to a resource through the API server's discovery documents even in client
dry-run, and no real API server can run on the machines these tests run on. This serves the
discovery of the kinds sbx's manifests use (core v1, apps/v1, rbac.authorization.k8s.io/v1),
answers every object GET with the real 404 Status (nothing exists, so kubectl's dry run
"creates" each object), refuses every write with 405 (a client dry run must not write) and
records the requests, so a test can check kubectl asked only what a dry run asks.

Not Kubernetes: no objects, no validation (the tests validate with python3-kubernetes' models,
tests/integration/kubernetes/k8s_validation.py), no OpenAPI (kubectl runs with
--validate=false)."""
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]

# (group, version) -> [(resource, kind, namespaced)]
RESOURCES = {
    ("", "v1"): [("pods", "Pod", True), ("services", "Service", True),
                 ("serviceaccounts", "ServiceAccount", True),
                 ("configmaps", "ConfigMap", True), ("secrets", "Secret", True),
                 ("persistentvolumeclaims", "PersistentVolumeClaim", True),
                 ("namespaces", "Namespace", False)],
    ("apps", "v1"): [("deployments", "Deployment", True)],
    ("rbac.authorization.k8s.io", "v1"): [("roles", "Role", True),
                                          ("rolebindings", "RoleBinding", True),
                                          ("clusterroles", "ClusterRole", False),
                                          ("clusterrolebindings", "ClusterRoleBinding", False)],
}


def resource_list(group, version):
    gv = "%s/%s" % (group, version) if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
            "resources": [{"name": r, "singularName": k.lower(), "namespaced": ns, "kind": k,
                           "verbs": VERBS} for r, k, ns in RESOURCES[(group, version)]]}


def group_list():
    groups = []
    for (g, v) in RESOURCES:
        if g:
            gv = {"groupVersion": "%s/%s" % (g, v), "version": v}
            groups.append({"name": g, "versions": [gv], "preferredVersion": gv})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def not_found(path):
    m = re.match(r"^/apis?/(?:[^/]+/)?v1/(?:namespaces/[^/]+/)?([^/]+)/([^/?]+)$", path)
    res, name = (m.group(1), m.group(2)) if m else ("objects", path)
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": '%s "%s" not found' % (res, name), "reason": "NotFound",
            "details": {"name": name, "kind": res}, "code": 404}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):  # quiet
        pass

    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        self.server.requests.append(("GET", path))
        if path == "/api":
            return self.reply(200, {"kind": "APIVersions", "versions": ["v1"],
                                    "serverAddressByClientCIDRs": []})
        if path == "/apis":
            return self.reply(200, group_list())
        if path == "/api/v1":
            return self.reply(200, resource_list("", "v1"))
        m = re.match(r"^/apis/([^/]+)/([^/]+)$", path)
        if m and (m.group(1), m.group(2)) in RESOURCES:
            return self.reply(200, resource_list(m.group(1), m.group(2)))
        return self.reply(404, not_found(path))

    def refuse(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        self.server.requests.append((self.command, self.path.split("?", 1)[0]))
        self.reply(405, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                         "message": "the FAKE discovery server takes no writes",
                         "reason": "MethodNotAllowed", "code": 405})

    do_POST = do_PUT = do_PATCH = do_DELETE = refuse


class FakeDiscovery:
    """start() → .url; .requests: [(method, path)]; stop()."""

    def __init__(self):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.requests = []
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def requests(self):
        return self.httpd.requests

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def kubeconfig(self, path):
        """A kubeconfig naming only this server (kubectl must not use the user's)."""
        with open(path, "w") as f:
            json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "fake",
                       "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                       "users": [{"name": "fake", "user": {}}],
                       "contexts": [{"name": "fake", "context": {"cluster": "fake",
                                                                 "user": "fake"}}]}, f)
        return path
