// OpenSandbox JS SDK (published, pinned in package.json) against a real `sbx serve`.
// One scenario per feature. Environment (set by run.sh):
//   OPEN_SANDBOX_DOMAIN   host:port of the server      OPEN_SANDBOX_API_KEY   its API key
//   SBX_PROVIDER          provider to create sandboxes on (native, process, docker ...)
//   SBX_IMAGE             image URI (default: host)
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { ConnectionConfig, Sandbox, SandboxManager } from "@alibaba-group/opensandbox";

const provider = process.env.SBX_PROVIDER || "native";
const image = process.env.SBX_IMAGE || "host";
const config = new ConnectionConfig({
  domain: process.env.OPEN_SANDBOX_DOMAIN,
  apiKey: process.env.OPEN_SANDBOX_API_KEY,
  requestTimeoutSeconds: 60,
  disableMetrics: false, // exercise POST /v1/metrics/events too
});
const suite = `compat-${process.pid}`;
const created = [];

async function make(extra = {}) {
  const sbx = await Sandbox.create({
    connectionConfig: config,
    image,
    timeoutSeconds: 600,
    resource: { cpu: "1", memory: "512Mi" },
    metadata: { suite },
    extensions: { provider },
    readyTimeoutSeconds: 30,
    ...extra,
  });
  created.push(sbx);
  return sbx;
}

after(async () => {
  for (const sbx of created) {
    try { await sbx.kill(); } catch { /* already gone */ }
    try { await sbx.close(); } catch { /* ignore */ }
  }
});

test("lifecycle: create, info, kill", async () => {
  const sbx = await make({ metadata: { suite, role: "lifecycle" } });
  const info = await sbx.getInfo();
  assert.equal(info.id, sbx.id);
  assert.equal(info.status.state, "Running");
  assert.equal(info.metadata.role, "lifecycle");
  const ttl = new Date(info.expiresAt).getTime() - Date.now();
  assert.ok(ttl > 500_000 && ttl <= 600_000, `expiresAt about 10 minutes ahead, got ${ttl} ms`);
  assert.equal(await sbx.isHealthy(), true);
  await sbx.kill();
  await assert.rejects(sbx.getInfo(), (err) => {
    assert.match(String(err.error?.code ?? err.message), /NOT_FOUND|404/);
    return true;
  });
});

test("lifecycle: no expiry when timeoutSeconds is null", async () => {
  const sbx = await make({ timeoutSeconds: null });
  const info = await sbx.getInfo();
  assert.ok(info.expiresAt == null, `expected no expiresAt, got ${info.expiresAt}`);
});

test("commands: streaming handlers, exit codes", async () => {
  const sbx = await make();
  const seen = [];
  let completed = false;
  const ex = await sbx.commands.run(
    "for i in 1 2 3; do echo line$i; done; echo oops >&2",
    undefined,
    {
      onStdout: (m) => seen.push(m.text),
      onExecutionComplete: () => { completed = true; },
    },
  );
  assert.deepEqual(seen, ["line1", "line2", "line3"]);
  assert.deepEqual(ex.logs.stdout.map((m) => m.text), ["line1", "line2", "line3"]);
  assert.deepEqual(ex.logs.stderr.map((m) => m.text), ["oops"]);
  assert.equal(completed, true);
  assert.ok(!ex.error);
  const bad = await sbx.commands.run("exit 3");
  assert.equal(bad.error?.value ?? bad.error?.evalue, "3");
  const env = await sbx.commands.run("echo $FOO; pwd", { envs: { FOO: "bar" }, workingDirectory: "/tmp" });
  assert.deepEqual(env.logs.stdout.map((m) => m.text), ["bar", "/tmp"]);
});

test("commands: background, status, logs", async () => {
  const sbx = await make();
  const ex = await sbx.commands.run("echo start; sleep 0.3; echo done", { background: true });
  assert.ok(ex.id, "background command has an id");
  let status;
  for (let i = 0; i < 100; i++) {
    status = await sbx.commands.getCommandStatus(ex.id);
    if (!status.running) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(status.running, false);
  assert.equal(status.exitCode, 0);
  const logs = await sbx.commands.getBackgroundCommandLogs(ex.id);
  assert.equal(logs.content, "start\ndone\n");
  const again = await sbx.commands.getBackgroundCommandLogs(ex.id, logs.cursor);
  assert.equal(again.content, "");
});

test("commands: interrupt a long command", async () => {
  const sbx = await make();
  const ex = await sbx.commands.run("sleep 30", { background: true });
  await sbx.commands.interrupt(ex.id);
  let status;
  for (let i = 0; i < 100; i++) {
    status = await sbx.commands.getCommandStatus(ex.id);
    if (!status.running) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(status.running, false);
});

test("files: write, read, info, search, move, replace, permissions, delete", async () => {
  const sbx = await make();
  await sbx.files.createDirectories([{ path: "/tmp/demo/sub", mode: 755 }]);
  await sbx.files.writeFiles([
    { path: "/tmp/demo/hello.txt", data: "Hello World", mode: 644 },
    { path: "/tmp/demo/sub/b.txt", data: "bee" },
  ]);
  assert.equal(await sbx.files.readFile("/tmp/demo/hello.txt"), "Hello World");
  assert.equal(await sbx.files.readFile("/tmp/demo/hello.txt", { range: "bytes=6-10" }), "World");
  const info = await sbx.files.getFileInfo(["/tmp/demo/hello.txt"]);
  assert.equal(info["/tmp/demo/hello.txt"].size, 11);
  assert.equal(info["/tmp/demo/hello.txt"].mode, 644);
  const found = await sbx.files.search({ path: "/tmp/demo", pattern: "*.txt" });
  assert.deepEqual(found.map((f) => f.path).sort(), ["/tmp/demo/hello.txt", "/tmp/demo/sub/b.txt"]);
  await sbx.files.moveFiles([{ src: "/tmp/demo/sub/b.txt", dest: "/tmp/demo/c.txt" }]);
  await sbx.files.replaceContents([{ path: "/tmp/demo/c.txt", oldContent: "bee", newContent: "sea" }]);
  assert.equal(await sbx.files.readFile("/tmp/demo/c.txt"), "sea");
  await sbx.files.setPermissions([{ path: "/tmp/demo/c.txt", mode: 600 }]);
  const perm = await sbx.files.getFileInfo(["/tmp/demo/c.txt"]);
  assert.equal(perm["/tmp/demo/c.txt"].mode, 600);
  await sbx.files.deleteFiles(["/tmp/demo/c.txt"]);
  await assert.rejects(sbx.files.getFileInfo(["/tmp/demo/c.txt"]));
  await sbx.files.deleteDirectories(["/tmp/demo"]);
  const gone = await sbx.commands.run("test -e /tmp/demo; echo $?");
  assert.deepEqual(gone.logs.stdout.map((m) => m.text), ["1"]);
});

test("volumes: a pvc shared by claimName, read-only mounts, host paths need the allow-list", async (t) => {
  const claim = `compat-${process.pid}`;
  const pvc = (extra = {}) => ({
    name: "data", mountPath: "/data",
    pvc: { claimName: claim, deleteOnSandboxTermination: true }, ...extra,
  });
  const code = (re) => (err) => { assert.match(String(err.error?.code ?? err.message), re); return true; };
  if (provider === "process") {
    await assert.rejects(make({ volumes: [pvc()] }), code(/API_NOT_SUPPORTED/));
    return;
  }
  if (provider !== "native" && provider !== "kubernetes") {
    t.skip(`volume checks are written for the native, kubernetes and process providers, not ${provider}`);
    return;
  }
  const a = await make({ volumes: [pvc()] });
  let r = await a.commands.run("echo shared > /data/f && cat /data/f");
  assert.deepEqual(r.logs.stdout.map((m) => m.text), ["shared"]);
  const b = await make({ volumes: [pvc({ readOnly: true })] });
  r = await b.commands.run("cat /data/f; echo x > /data/g; echo rc=$?");
  assert.deepEqual(r.logs.stdout.map((m) => m.text), ["shared", "rc=1"]);
  assert.match(r.logs.stderr.map((m) => m.text).join(""), /Read-only file system/);
  await a.kill();
  await b.kill();
  // native: host paths need the allow-list; kubernetes binds none (a node's files)
  await assert.rejects(make({ volumes: [{ name: "h", mountPath: "/h", host: { path: "/etc" } }] }),
    code(provider === "kubernetes" ? /VOLUME::UNSUPPORTED_BACKEND/ : /VOLUME::HOST_PATH_NOT_ALLOWED/));
  await assert.rejects(make({
    volumes: [{ name: "n", mountPath: "/n", pvc: { claimName: `${claim}-missing`, createIfNotExists: false } }],
  }), code(/VOLUME::PVC_NOT_FOUND/));
});

test("endpoints: any port, scheme-less", async () => {
  const sbx = await make();
  const ep = await sbx.getEndpoint(44772);
  assert.ok(ep.endpoint && !ep.endpoint.includes("://"), `scheme-less endpoint, got ${ep.endpoint}`);
  assert.ok(ep.endpoint.includes(`/sandboxes/${sbx.id}/proxy/44772`), "execd goes through the router");
  const other = await sbx.getEndpoint(8080);
  assert.ok(other.endpoint);
  const url = await sbx.getEndpointUrl(44772);
  assert.match(url, /^http:\/\//);
});

test("secureAccess: the SDK works on the sandbox's own token, which is not the API key", async () => {
  const sbx = await make({ secureAccess: true });
  const ep = await sbx.getEndpoint(44772);
  assert.ok(ep.headers["OpenSandbox-Secure-Access"], "the endpoint carries the sandbox's token");
  assert.equal(ep.headers["OPEN-SANDBOX-API-KEY"], undefined, "and not the API key");
  const ex = await sbx.commands.run("echo through-token");
  assert.deepEqual(ex.logs.stdout.map((m) => m.text), ["through-token"]);
  await sbx.files.writeFiles([{ path: "/tmp/secure.txt", data: "ok" }]);
  assert.equal(await sbx.files.readFile("/tmp/secure.txt"), "ok");
  // the token opens nothing but this sandbox: not the API
  const r = await fetch(`http://${process.env.OPEN_SANDBOX_DOMAIN}/v1/sandboxes`,
    { headers: ep.headers });
  assert.equal(r.status, 401);
});

test("egress: networkPolicy at create, get, patch and delete rules through port 18080", async () => {
  const networkPolicy = { defaultAction: "deny", egress: [{ action: "allow", target: "pypi.org" }] };
  if (provider !== "native" && provider !== "docker") {
    // the process provider cannot enforce it: refused, not ignored
    await assert.rejects(make({ networkPolicy }), (err) => {
      assert.match(String(err.error?.code ?? err.message), /API_NOT_SUPPORTED/);
      return true;
    });
    return;
  }
  const sbx = await make({ networkPolicy });
  const ep = await sbx.getEndpoint(18080);
  assert.ok(ep.headers["OPENSANDBOX-EGRESS-AUTH"], "the egress endpoint carries its token");
  assert.deepEqual(await sbx.getEgressPolicy(), networkPolicy);
  await sbx.patchEgressRules([{ action: "allow", target: "*.Example.com" },
    { action: "deny", target: "pypi.org" }]);
  assert.deepEqual((await sbx.getEgressPolicy()).egress, [
    { action: "allow", target: "*.example.com" }, { action: "deny", target: "pypi.org" }]);
  await sbx.deleteEgressRules(["pypi.org", "not-there.org"]);
  assert.deepEqual((await sbx.getEgressPolicy()).egress,
    [{ action: "allow", target: "*.example.com" }]);
  await assert.rejects(sbx.patchEgressRules([{ action: "allow", target: "10.0.0.0/8" }]));
  // the sandbox itself works as before (the router, not its network); it resolves through
  // sbx's resolver: native on the bridge's gateway, docker inside the container's namespace
  const ex = await sbx.commands.run("cat /etc/resolv.conf");
  assert.match(ex.logs.stdout.map((m) => m.text).join("\n"),
    provider === "docker" ? /^nameserver 127\.0\.0\.53$/m : /^nameserver 10\./);
});

test("credentialProxy: the Credential Vault through port 18080", async () => {
  const networkPolicy = { defaultAction: "deny", egress: [{ action: "allow", target: "api.example.com" }] };
  const credentialProxy = { enabled: true };
  if (provider !== "native" && provider !== "docker") {
    await assert.rejects(make({ networkPolicy, credentialProxy }), (err) => {
      assert.match(String(err.error?.code ?? err.message), /API_NOT_SUPPORTED/);
      return true;
    });
    return;
  }
  await assert.rejects(make({ credentialProxy }), (err) => {
    assert.match(String(err.error?.message ?? err.message), /requires `networkPolicy`/);
    return true;
  });
  const sbx = await make({ networkPolicy, credentialProxy });
  const v = sbx.credentialVault;
  const secret = `sk-compat-${process.pid}`;
  const st = await v.create({
    credentials: [{ name: "openai", source: { type: "inline", value: secret } }], bindings: [] });
  assert.deepEqual(st.credentials, [{ name: "openai", sourceType: "inline", revision: st.revision }]);
  assert.deepEqual(await v.get(), st);
  const st2 = await v.patch({ expectedRevision: st.revision,
    credentials: { add: [{ name: "k2", source: { type: "inline", value: "v2" } }] } });
  assert.equal(st2.revision, st.revision + 1);
  await assert.rejects(v.patch({ expectedRevision: st.revision, credentials: { delete: ["k2"] } }),
    (err) => { assert.equal(err.statusCode, 409); return true; });
  assert.deepEqual((await v.listCredentials()).map((c) => c.name), ["openai", "k2"]);
  assert.equal((await v.getCredential("k2")).revision, st2.revision);
  assert.deepEqual(await v.listBindings(), []);
  // a binding on a port the proxy never sees is refused, not stored and ignored
  await assert.rejects(v.patch({ bindings: { add: [{ name: "b", match: { hosts: ["api.example.com"],
    ports: [8443] }, auth: { type: "bearer", credential: "openai" } }] } }), (err) => {
    assert.equal(err.statusCode, 400);
    assert.match(err.message, /port 8443/);
    return true;
  });
  // one with the spec's defaults (https, 443) is stored, on docker too (its injection:
  // tests/integration/server/test_credinject.py, docker/test_credproxy_https_docker.py)
  const tlsBinding = { name: "b", match: { hosts: ["api.example.com"] },
    auth: { type: "bearer", credential: "openai" } };
  const st3 = await v.patch({ bindings: { add: [tlsBinding] } });
  assert.deepEqual(st3.bindings.map((b) => b.name), ["b"]);
  assert.ok(!JSON.stringify(await v.get()).includes(secret), "values are write-only");
  await v.delete();
  await assert.rejects(v.get(), (err) => { assert.equal(err.statusCode, 404); return true; });
});

test("pause and resume", async () => {
  const sbx = await make();
  if (provider === "kubernetes") {
    // a pod cannot be frozen through the Kubernetes API: refused, the sandbox left running
    await assert.rejects(sbx.pause(), (err) => {
      assert.match(String(err.error?.code ?? err.message), /API_NOT_SUPPORTED/);
      return true;
    });
    assert.equal((await sbx.getInfo()).status.state, "Running");
    return;
  }
  await sbx.pause();
  assert.equal((await sbx.getInfo()).status.state, "Paused");
  const resumed = await sbx.resume();
  created.push(resumed);
  assert.equal((await resumed.getInfo()).status.state, "Running");
  const ex = await resumed.commands.run("echo back");
  assert.deepEqual(ex.logs.stdout.map((m) => m.text), ["back"]);
});

test("renew", async () => {
  const sbx = await make();
  await sbx.renew(1800);
  const info = await sbx.getInfo();
  const ttl = new Date(info.expiresAt).getTime() - Date.now();
  assert.ok(ttl > 1_700_000 && ttl <= 1_800_000, `renewed to about 30 minutes, got ${ttl} ms`);
});

test("snapshots: create, Ready, list, restore with snapshotId, delete", async (t) => {
  const manager = SandboxManager.create({ connectionConfig: config });
  try {
    if (provider === "process" || provider === "kubernetes") {
      const sbx = await make();
      await assert.rejects(manager.createSnapshot(sbx.id), (err) => {
        assert.match(String(err.error?.code ?? err.message), /API_NOT_SUPPORTED/);
        return true;
      });
      return;
    }
    // native: the BusyBox image run.sh imported (the built-in host image has no OCI layers)
    const src = await make({ image: provider === "native" ? "sbx-test/busybox:1" : image });
    await src.commands.run("mkdir -p /root && echo kept > /root/k");
    const snap = await manager.createSnapshot(src.id, { name: `snap-${suite}` });
    assert.equal(snap.sandboxId, src.id);
    assert.ok(snap.createdAt instanceof Date);
    let info = snap;
    for (let i = 0; i < 300 && info.status.state !== "Ready"; i++) {
      assert.notEqual(info.status.state, "Failed", JSON.stringify(info.status));
      await new Promise((r) => setTimeout(r, 100));
      info = await manager.getSnapshot(snap.id);
    }
    assert.equal(info.status.state, "Ready");
    const listed = await manager.listSnapshots({ sandboxId: src.id, states: ["Ready"] });
    assert.deepEqual(listed.items.map((i) => i.id), [snap.id]);
    const byName = await manager.listSnapshots({ name: `snap-${suite}` });
    assert.deepEqual(byName.items.map((i) => i.id), [snap.id]);
    const restored = await Sandbox.create({
      connectionConfig: config, snapshotId: snap.id, timeoutSeconds: 600,
      resource: { cpu: "1", memory: "512Mi" }, metadata: { suite }, extensions: { provider },
      readyTimeoutSeconds: 60,
    });
    created.push(restored);
    const r = await restored.commands.run("cat /root/k");
    assert.deepEqual(r.logs.stdout.map((m) => m.text), ["kept"]);
    assert.equal((await restored.getInfo()).snapshotId, snap.id);
    await manager.deleteSnapshot(snap.id);
    await assert.rejects(manager.getSnapshot(snap.id));
  } finally {
    await manager.close();
  }
});

// SDK 0.1.11 has no pool calls: the pool is made over HTTP, the create from it is the SDK's own
// Sandbox.create with extensions.poolRef (its default entrypoint and limits, the pool's image).
test("pools: Sandbox.create with extensions.poolRef takes a warm sandbox", async (t) => {
  if (!["native", "process", "docker", "kubernetes"].includes(provider)) {
    t.skip(`provider ${provider} keeps no pools`);
    return;
  }
  const base = `http://${process.env.OPEN_SANDBOX_DOMAIN}/v1/pools`;
  const headers = { "OPEN-SANDBOX-API-KEY": process.env.OPEN_SANDBOX_API_KEY,
                    "Content-Type": "application/json" };
  const name = `compat-${process.pid}`;
  const made = await fetch(base, { method: "POST", headers, body: JSON.stringify({
    name, capacitySpec: { bufferMax: 1, bufferMin: 1, poolMax: 3, poolMin: 0 },
    template: { image: { uri: image }, entrypoint: ["tail", "-f", "/dev/null"], provider,
                env: { FROM_POOL: "1" } } }) });
  assert.equal(made.status, 201, await made.text());
  try {
    for (let i = 0; i < 100; i++) { // the refiller makes the warm one
      const p = await (await fetch(`${base}/${name}`, { headers })).json();
      if (p.status.available === 1) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const sbx = await make({ extensions: { provider, poolRef: name },
                             metadata: { suite, role: "pooled" } });
    const info = await sbx.getInfo();
    assert.equal(info.status.state, "Running");
    assert.equal(info.metadata.role, "pooled");
    const ex = await sbx.commands.run("echo $FROM_POOL");
    assert.deepEqual(ex.logs.stdout.map((m) => m.text), ["1"]);
    const p = await (await fetch(`${base}/${name}`, { headers })).json();
    assert.equal(p.status.allocated, 1);
    await assert.rejects(make({ extensions: { provider, poolRef: name }, entrypoint: ["sleep", "9"] }),
      (err) => { assert.match(String(err.error?.message ?? err.message), /entrypoint/); return true; });
  } finally {
    await fetch(`${base}/${name}`, { method: "DELETE", headers });
  }
});

test("manager: list with metadata and state filters", async () => {
  const sbx = await make({ metadata: { suite, role: "listed" } });
  const manager = SandboxManager.create({ connectionConfig: config });
  try {
    const res = await manager.listSandboxInfos({ metadata: { suite, role: "listed" }, states: ["Running"] });
    assert.deepEqual(res.items.map((i) => i.id), [sbx.id]);
    assert.equal(res.pagination.totalItems, 1);
    const none = await manager.listSandboxInfos({ metadata: { suite, role: "listed" }, states: ["Paused"] });
    assert.equal(none.items.length, 0);
  } finally {
    await manager.close();
  }
});
