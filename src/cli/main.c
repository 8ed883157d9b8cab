/*
 * main.c - `sbx`: table dispatch of verbs. Each verb lives in its own cmd_<verb>.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client_util.h"
#include "common/log.h"
#include "net/net.h"

#define CMD(n, fn, sum, use)                                       \
    {                                                              \
        .name = (n), .summary = (sum), .usage = (use), .run = (fn) \
    }

/* Verbs that need the heavy libraries (libcurl, libmicrohttpd, SQLite, libarchive) live in the
 * companion binary sbx-full next to sbx: loading those libraries costs several milliseconds,
 * which `sbx run` must not pay. In sbx itself such a verb execs sbx-full (see forward.c). */
#ifdef SBX_CLI_FULL
#define HEAVY(fn) (fn)
#else
#define HEAVY(fn) sbx_cli_forward
#endif

const struct sbx_cli_cmd sbx_cli_commands[] = {
    CMD("create", HEAVY(sbx_cmd_create), "Create a sandbox on a server and print its id",
        "Usage: sbx create [OPTIONS] [-- ENTRYPOINT...]\n\n"
        "Create a sandbox and print its id once it is running. Flags that docker create has\n"
        "mean what they mean there (-e -l -m -p --cpus --name); -i/-t (stdin, a terminal for\n"
        "the entrypoint) and -c (--cpu-shares, a relative weight) are refused with a pointer:\n"
        "sbx has no attach (`sbx exec -it ID`) and limits CPUs, not weights.\n\n"
        "      --image URI      image (default: the built-in `host` image)\n"
        "      --snapshot SNAP  restore snapshot SNAP instead of an image (`sbx snapshot`);\n"
        "                       the entrypoint defaults to `tail -f /dev/null`\n"
        "      --timeout SECS   time to live, >= 60 (default: 0 = never expires)\n"
        "  -e, --env K=V        environment variable (repeatable)\n"
        "  -l, --label K=V      metadata label (repeatable; also --metadata)\n"
        "      --cpus N         CPU limit (e.g. 0.5, 2): resourceLimits cpu=N\n"
        "  -m, --memory SIZE    memory limit, b/k/m/g as docker (512m = 512Mi)\n"
        "      --limit K=V      any resource limit, e.g. cpu=1, memory=512Mi (repeatable;\n"
        "                       default without any: cpu=1, memory=2Gi)\n"
        "  -p, --publish [HOSTPORT:]PORT   publish sandbox PORT on the server's\n"
        "                       publish_address, at HOSTPORT or a free port (repeatable;\n"
        "                       tcp; `sbx inspect` shows where; docs/server.md)\n"
        "      --provider NAME  provider (default: the server's default)\n"
        "  -r, --reuse-key KEY  find-or-create: reuse the server's sandbox with this key and\n"
        "                       the same spec (started again if stopped)\n"
        "  --desktop[=SPEC]     with a desktop, up when the create answers: 1280x800, or\n"
        "                       SPEC = WxH[xD][,wm=openbox|none] (see `sbx desktop`)\n"
        "      --name NAME      a name that every verb takes in place of the id; unique among\n"
        "                       the server's sandboxes (409 otherwise), "
        "[a-zA-Z0-9][a-zA-Z0-9_.-]*\n"
        "                       ending with a letter or digit, at most 63 (a label's rules: it\n"
        "                       is stored as the metadata label sbx/name)\n"
        "  -q, --quiet          print only the id\n" SBX_CLI_CLIENT_HELP),
    CMD("ls", HEAVY(sbx_cmd_ls), "List sandboxes",
        "Usage: sbx ls [--json|--quiet|--format FORMAT] [--state STATE]... [--metadata K=V]...\n\n"
        "  -j, --json           one JSON object per line instead of a table (= --format json)\n"
        "  -q, --quiet          only the ids, one a line\n"
        "      --format FORMAT  json (JSON lines), or a template as docker's: text with\n"
        "                       {{.ID}} {{.Name}} {{.State}} {{.Reason}} {{.Message}} {{.Image}}\n"
        "                       {{.Provider}} {{.Created}} {{.Expires}} {{.Entrypoint}}\n"
        "                       {{.Metadata}} {{.Metadata.KEY}} {{.}}, {{json .FIELD}} for JSON,\n"
        "                       \\t \\n escapes; `table TEMPLATE` prints a header first\n"
        "  -s, --state STATE    only sandboxes in STATE (repeatable: any of them)\n"
        "  -l, --metadata K=V   only sandboxes with this label (repeatable: all of "
        "them)\n" SBX_CLI_CLIENT_HELP),
    CMD("inspect", HEAVY(sbx_cmd_inspect), "Show sandboxes as JSON",
        "Usage: sbx inspect [--format FORMAT] ID...\n\n"
        "The sandboxes as one JSON array (as docker inspect). An ID may be a sandbox's name or\n"
        "any unique start of its id, as in every verb that takes one.\n\n"
        "  -f, --format FORMAT  each sandbox through FORMAT instead: json (JSON lines) or a\n"
        "                       template (see `sbx ls --help`)\n" SBX_CLI_CLIENT_HELP),
    CMD("exec", HEAVY(sbx_cmd_exec), "Run a command in a sandbox, streaming its output",
        "Usage: sbx exec [OPTIONS] ID -- CMD [ARG...]\n"
        "       sbx exec -it ID [--] [CMD [ARG...]]\n\n"
        "Run CMD in the sandbox, as docker exec: its output byte for byte as it comes (stdout\n"
        "and stderr apart), exit with its exit code. A single CMD argument is a shell command\n"
        "line; several are quoted word by word. SIGINT, SIGTERM, SIGHUP, SIGQUIT are passed\n"
        "on to it (a third Ctrl-C gives up and ends it). With -it CMD runs on a terminal (a\n"
        "PTY session; a shell when there is no CMD): keys go to it (Ctrl-C too), the window\n"
        "size follows; stdin must be a terminal.\n\n"
        "  -i, --interactive    keep stdin open: ours is the command's (without -i it reads EOF)\n"
        "  -t, --tty            a terminal (pty) in the sandbox; needs -i (docker allows -t\n"
        "                       alone; sbx has no output-only terminal)\n"
        "  -w, --workdir DIR    working directory\n"
        "  -e, --env K=V        environment variable (repeatable)\n"
        "      --timeout MS     kill the command after MS milliseconds (sbx's; exit 137)\n\n"
        "Exit status, as docker exec: the command's; 128+N when signal N killed it; 126 when\n"
        "it cannot be executed, 127 when it is not found; 125 when sbx itself failed (no such\n"
        "sandbox, the server unreachable, a usage error).\n\n" SBX_CLI_CLIENT_HELP),
    CMD("shell", HEAVY(sbx_cmd_shell), "An interactive shell in a sandbox",
        "Usage: sbx shell ID\n\n"
        "A shell (bash, else sh) in the sandbox on this terminal, as `sbx exec -it ID`: a\n"
        "PTY session (docs/execd.md), job control and Ctrl-C inside the sandbox, the window\n"
        "size followed. Exits with the shell's exit code; stdin must be a "
        "terminal.\n\n" SBX_CLI_CLIENT_HELP),
    CMD("cp", HEAVY(sbx_cmd_cp), "Copy files or directories into or out of a sandbox",
        "Usage: sbx cp LOCAL ID:/PATH\n       sbx cp ID:/PATH LOCAL\n"
        "       sbx cp - ID:/DIR        (a tar stream from stdin, extracted in DIR)\n"
        "       sbx cp ID:/PATH -       (PATH as a tar stream on stdout)\n\n"
        "As docker cp. A file keeps its mode. A directory is copied whole (modes, symlinks as\n"
        "symlinks): into an existing directory DST under its own name, else as DST (`DIR/.`\n"
        "copies DIR's contents). Directories travel as a tar stream between this machine and\n"
        "`tar` in the sandbox (as kubectl cp: the image needs one); what comes into the\n"
        "sandbox belongs to its user, what comes out to yours, and a name outside the copied\n"
        "directory (`..`, absolute, through a symlink) is refused.\n\n" SBX_CLI_CLIENT_HELP),
    CMD("pause", HEAVY(sbx_cmd_pause), "Pause (freeze) sandboxes",
        "Usage: sbx pause ID...\n\n" SBX_CLI_CLIENT_HELP),
    CMD("resume", HEAVY(sbx_cmd_resume), "Resume paused sandboxes",
        "Usage: sbx resume ID...\n\n" SBX_CLI_CLIENT_HELP),
    CMD("stop", HEAVY(sbx_cmd_stop), "Stop sandboxes, keeping their files for `sbx start`",
        "Usage: sbx stop ID...\n\n"
        "Stop the sandbox's processes but keep its filesystem; `sbx start` runs it again (the\n"
        "entrypoint too), `sbx rm` removes it.\n\n" SBX_CLI_CLIENT_HELP),
    CMD("start", HEAVY(sbx_cmd_start), "Start stopped sandboxes again",
        "Usage: sbx start ID...\n\nStart a stopped sandbox again, with the files it "
        "had.\n\n" SBX_CLI_CLIENT_HELP),
    CMD("renew", HEAVY(sbx_cmd_renew), "Move a sandbox's expiry to now + SECONDS",
        "Usage: sbx renew ID SECONDS\n\n" SBX_CLI_CLIENT_HELP),
    CMD("rm", HEAVY(sbx_cmd_rm), "Delete sandboxes", "Usage: sbx rm ID...\n\n" SBX_CLI_CLIENT_HELP),
    CMD("desktop", HEAVY(sbx_cmd_desktop), "A sandbox's desktop: screenshots, actions, tree",
        "Usage: sbx desktop status|start|stop|shot|tree|windows|record|record-stop|view [OPTIONS] "
        "ID\n"
        "       sbx desktop do [OPTIONS] ID ACTION\n\n"
        "The sandbox's GUI desktop (create it with `sbx create --desktop`, or `start` one).\n\n"
        "  status               state, size, restarts, the last error (JSON)\n"
        "  start [--size WxH] [--no-wm]   start one (default 1280x800 with openbox)\n"
        "  stop                 stop it and every program on it\n"
        "  shot [-o FILE] [--jpeg] [--quality N] [--region X,Y,W,H] [--scale F] [--no-cursor]\n"
        "                       a screenshot (PNG unless --jpeg) to FILE or stdout\n"
        "  do ACTION            an action as JSON (OSWorld computer_13, Anthropic computer\n"
        "                       use, or a list), `-` reads it from stdin; e.g.\n"
        "                       '{\"action_type\":\"CLICK\",\"parameters\":{\"x\":10,\"y\":20}}'\n"
        "  tree [--json] [--no-actions]   the accessibility tree (OSWorld's XML by default)\n"
        "  windows              the top-level windows (JSON)\n"
        "  record [--fps N]     start a screen recording (H.264, default 15 fps)\n"
        "  record-stop [-o FILE]   stop it and write the MP4 to FILE or stdout\n"
        "  view [--ttl SECONDS] a link to watch and drive it in a browser (noVNC); whoever\n"
        "                       holds it can, until it expires (default 1 "
        "hour)\n\n" SBX_CLI_CLIENT_HELP),
    CMD("snapshot", HEAVY(sbx_cmd_snapshot), "Snapshots of sandboxes (create, ls, rm, export...)",
        "Usage: sbx snapshot create ID [--name NAME] [--wait]\n"
        "       sbx snapshot ls [--sandbox ID] [-q]\n"
        "       sbx snapshot inspect SNAPSHOT...\n"
        "       sbx snapshot rm SNAPSHOT...\n"
        "       sbx snapshot export SNAPSHOT -o FILE\n"
        "       sbx snapshot import FILE\n\n"
        "A snapshot is a sandbox's files at the moment of `create` (the sandbox is frozen for the\n"
        "copy), kept by the server as an image; `sbx create --snapshot SNAP` runs a new sandbox\n"
        "from it, on any provider that runs images (native, docker). `export` writes it as one\n"
        "archive that `docker load`, podman, skopeo and `sbx snapshot import` read (another\n"
        "server, another machine). Sandboxes of the built-in `host` image cannot be\n"
        "snapshotted (docs/api.md \"Snapshots\").\n\n"
        "  -n, --name NAME      create: a name for the snapshot\n"
        "  -w, --wait           create: wait until its image is written (Ready)\n"
        "  -s, --sandbox ID     ls: only the snapshots of this sandbox\n"
        "  -o, --output FILE    export: where the archive goes\n"
        "  -q, --quiet          ls: only the ids\n" SBX_CLI_CLIENT_HELP),
    CMD("secret", sbx_cmd_secret, "Manage encrypted secrets (set, ls, rm)",
        "Usage: sbx secret set NAME [--from-env VAR]\n"
        "       sbx secret ls [--json]\n"
        "       sbx secret rm NAME\n\n"
        "Secrets are encrypted at rest (XChaCha20-Poly1305) in <state dir>/secrets with a\n"
        "random master key (<state dir>/secrets/master.key, mode 0600). `set` reads the value\n"
        "from standard input (one trailing newline dropped; not echoed on a terminal), or\n"
        "once from the environment variable VAR - never from the command line. `ls` shows\n"
        "names and dates only.\n\n"
        "  -s, --state-dir DIR  state directory (default: $SBX_STATE_DIR or /var/lib/sbx)\n"
        "  -k, --key-file FILE  master key file (32 bytes, mode 0600) instead of the default\n"
        "  -e, --from-env VAR   take the value from environment variable VAR\n"
        "  -j, --json           `ls` prints JSON lines\n"),
    CMD("help", sbx_cmd_help, "Show help for sbx or one of its commands",
        "Usage: sbx help [COMMAND]\n\nShow the list of commands, or the help of COMMAND.\n"),
    CMD("image", HEAVY(sbx_cmd_image), "Manage OCI images: pull, import, ls, rm",
        "Usage: sbx image pull [--insecure] [--platform OS/ARCH[/VARIANT]] [--username U\n"
        "                      [--password-stdin]] REF\n"
        "       sbx image import [--tag NAME] FILE\n"
        "       sbx image ls [--json]\n"
        "       sbx image rm REF...\n\n"
        "REF is [REGISTRY[:PORT]/]REPO[:TAG|@sha256:DIGEST] (no registry: docker.io).\n"
        "pull fetches from an OCI registry (HTTPS; plain HTTP with --insecure and always for\n"
        "localhost/127.0.0.1). The password comes from stdin (--password-stdin) or\n"
        "SBX_REGISTRY_PASSWORD; the username from --username or SBX_REGISTRY_USERNAME.\n"
        "pull prints the manifest digest; on a terminal (stderr) it also shows each layer as\n"
        "docker pull does: downloading with its bytes, complete, or already there.\n"
        "import reads an OCI image layout tar or a `docker save` tar.\n"
        "rm removes the name and garbage-collects unused blobs and layers.\n\n"
        "Options (all subcommands): --state-dir DIR (store in DIR/images; default\n"
        "$SBX_STATE_DIR/images or /var/lib/sbx/images).\n"),
    CMD("net", sbx_cmd_net, "List or garbage-collect the address leases of the bridge networks",
        "Usage: sbx net ls [--bridge NAME] [--subnet CIDR] [--state-dir DIR]\n"
        "       sbx net gc [--bridge NAME] [--subnet CIDR] [--state-dir DIR]\n\n"
        "  ls   list the leases of one network: address, host veth, MAC, leaf bridge,\n"
        "       sandbox id\n"
        "  gc   release leases whose sandbox is gone (its veth no longer exists; leases\n"
        "       younger than 60 s are kept: they may belong to a sandbox being created),\n"
        "       and remove leaf bridges that no sandbox is on any more (with their uplinks).\n"
        "       Without --bridge and --subnet: of every bridge network sbx made (a server's\n"
        "       providers.native.bridge, a test's): those with a lease dir in the state dir\n"
        "       and, with the default state dir, those the host's links show by sbx's marks\n"
        "       (a keep-alive port, uplinks named from the bridge's name), and the empty leaf\n"
        "       bridges of such a bridge that is gone; no other bridge is touched. One line\n"
        "       per network.\n\n"
        "  -b, --bridge NAME    one network: its bridge (default " SBX_NET_DEFAULT_BRIDGE ")\n"
        "  -s, --subnet CIDR    its subnet (default " SBX_NET_DEFAULT_SUBNET ")\n"
        "  -d, --state-dir DIR  where the leases live (default " SBX_NET_DEFAULT_STATE_DIR ")\n\n"
        "Changes nothing on the host besides the leases and empty leaf bridges (a bridge is\n"
        "set up by `sbx run` or the server).\n"),
    CMD("version", sbx_cmd_version, "Print the version of sbx",
        "Usage: sbx version\n\nPrint the version of sbx (same as `sbx --version`).\n"),
    CMD("run", sbx_cmd_run, "Run a command in a fresh sandbox",
        "Usage: sbx run [OPTIONS] [--] CMD [ARG...]\n\n"
        "Run CMD in a fresh sandbox with the caller's stdin/stdout/stderr, exit with its\n"
        "status (128+N if killed by signal N) and remove the sandbox.\n\n"
        "Options:\n"
        "  --image I          image to run (default: host, a read-only view of this host)\n"
        "  --rootfs DIR       use DIR (read-only) as the root filesystem instead of an image\n"
        "  -m, --memory SIZE  memory limit (e.g. 256m, 1g)\n"
        "  --pids N           maximum number of processes (default 1024; 0: no limit)\n"
        "  --cpus N           CPU quota in CPUs (e.g. 0.5, 1.5)\n"
        "  --network MODE     none (default, loopback only) | bridge | host\n"
        "  -e, --env K=V      set an environment variable (repeatable)\n"
        "  -w, --workdir DIR  working directory inside the sandbox\n"
        "  -v, --volume SRC:DST[:ro]  bind host path SRC at DST (repeatable)\n"
        "  --hostname H       hostname inside the sandbox (default: the sandbox id)\n"
        "  --user U[:G]       user (and group), by id or by name in the sandbox's /etc\n"
        "  --userns           own user namespace (ids 0-65535 map to host 1000000+)\n"
        "  --upper MODE       writable layer: tmpfs (default; RAM, at most the memory limit\n"
        "                     or 1 GiB) | disk (under the state dir)\n"
        "  --state-dir D      state directory (default $SBX_STATE_DIR or /var/lib/sbx)\n"
        "  --cgroup-parent P  cgroup below the caller's own (default $SBX_CGROUP_PARENT or sbx)\n"
        "  -t, --tty          a terminal of its own for CMD (its controlling terminal: job\n"
        "                     control, Ctrl-C to its foreground, the window size follows)\n"
        "  -i, --interactive  with -t: our stdin goes to that terminal (ours goes raw);\n"
        "                     without -t stdin is always the command's\n"
        "      --rm           accepted (docker's): the sandbox is always removed\n"
        "  (docker's -d, -p, -c and --name are refused with what to use instead)\n"
        "\nExit status: CMD's status; 125 when sbx itself fails; 2 for usage errors.\n"),
    CMD("gc", sbx_cmd_gc, "Remove what crashed sandboxes left behind",
        "Usage: sbx gc [--all] [--state-dir D]\n\n"
        "Remove the cgroups, network leases, writable layers and state of every recorded\n"
        "sandbox whose init is gone, and layers left without a record. The layers of stopped\n"
        "server sandboxes are kept. With --all, kill and remove running sandboxes and kept\n"
        "layers too. Then, with the host's own state dir (no --state-dir, no\n"
        "$SBX_STATE_DIR), as `sbx net gc` does: release the stale leases and remove the\n"
        "empty leaf bridges of every bridge network sbx made on this host (with another\n"
        "state dir, only the default bridge's leases of its sandboxes).\n"),
    CMD("serve", HEAVY(sbx_cmd_serve), "Run the sandbox server (OpenSandbox lifecycle API)",
        "Usage: sbx serve [--listen ADDR] [--state-dir DIR] [--config FILE]\n"
        "                 [--log-format json|text]\n\n"
        "Run the control plane in the foreground until SIGTERM/SIGINT.\n\n"
        "  --listen ADDR     HOST:PORT to listen on (default 127.0.0.1:8080)\n"
        "  --state-dir DIR   store, API key and sandboxes (default /var/lib/sbx)\n"
        "  --config FILE     config file (libconfig syntax; see docs/server.md)\n"
        "  --log-format F    `json` (default: one object a line) or `text`; a line logged\n"
        "                    for a request carries its X-Request-ID (`rid`, or `[rid]`)\n\n"
        "On first start an API key is generated into DIR/api-key (mode 0600); clients send it\n"
        "as `OPEN-SANDBOX-API-KEY: <key>` (or `Authorization: Bearer <key>`).\n"
        "Sandboxes keep running when the server stops; a restart re-adopts them.\n"),
    {0},
};

const struct sbx_cli_cmd *
sbx_cli_find(const char *name)
{
    for (const struct sbx_cli_cmd *c = sbx_cli_commands; c->name; c++) {
        if (strcmp(c->name, name) == 0)
            return c;
    }
    return NULL;
}

void
sbx_cli_print_usage(FILE *out, const struct sbx_cli_cmd *cmd)
{
    fputs(cmd->usage, out);
}

void
sbx_cli_print_overview(FILE *out)
{
    fputs("sbx - sandboxes for AI agents\n\n"
          "Usage: sbx [--version] [--help] COMMAND [ARGS...]\n\nCommands:\n",
          out);
    for (const struct sbx_cli_cmd *c = sbx_cli_commands; c->name; c++)
        fprintf(out, "  %-10s %s\n", c->name, c->summary);
    fputs("\nRun `sbx COMMAND --help` for the options of one command.\n\n"
          "Environment:\n"
          "  SBX_HOST       the server (default http://127.0.0.1:8080; https:// is verified)\n"
          "  SBX_API_KEY    its API key (default: the api-key file in SBX_STATE_DIR)\n"
          "  SBX_STATE_DIR  the local server's state (default /var/lib/sbx)\n"
          "  SBX_CA_CERT    the CAs (PEM) of an https:// SBX_HOST, instead of the system's\n"
          "  SBX_LOG_LEVEL  error|warn|info|debug|trace\n",
          out);
}

int
sbx_cli_wants_help(int argc, char **argv, const struct sbx_cli_cmd *cmd)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            sbx_cli_print_usage(stdout, cmd);
            return 1;
        }
    }
    return 0;
}

static void
init_logging(void)
{
    enum sbx_log_level level = SBX_LOG_INFO;
    const char *env = getenv("SBX_LOG_LEVEL"); /* NOLINT(concurrency-mt-unsafe): before threads */
    if (env && sbx_log_parse_level(env, &level) < 0)
        fprintf(stderr, "sbx: warning: ignoring SBX_LOG_LEVEL=%s\n", env);
    sbx_log_init("sbx", level, SBX_LOG_TEXT);
}

int
main(int argc, char **argv)
{
    init_logging();
    if (argc < 2) {
        sbx_cli_print_overview(stderr);
        return SBX_EXIT_USAGE;
    }
    const char *verb = argv[1];
    if (strcmp(verb, "--version") == 0 || strcmp(verb, "-V") == 0)
        return sbx_cmd_version(1, argv + 1);
    if (strcmp(verb, "--help") == 0 || strcmp(verb, "-h") == 0)
        return sbx_cmd_help(1, argv + 1);
    const struct sbx_cli_cmd *cmd = sbx_cli_find(verb);
    if (!cmd) {
        fprintf(stderr, "sbx: unknown command `%s`; run `sbx help` for the list\n", verb);
        return SBX_EXIT_USAGE;
    }
    if (sbx_cli_wants_help(argc - 1, argv + 1, cmd))
        return SBX_EXIT_OK;
    return cmd->run(argc - 1, argv + 1);
}
