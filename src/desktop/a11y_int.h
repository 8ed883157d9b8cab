/*
 * a11y_int.h - internals of the accessibility snapshot (a11y*.c), not for other modules.
 *
 * One snapshot = one private D-Bus connection to the sandbox's accessibility bus and a table
 * of nodes keyed by (bus name, object path). The walk fills the table in rounds of pipelined
 * calls (a11y_bus.c sends every queued call without waiting, up to a window, and hands each
 * reply to a11y_walk.c by its serial); the writers (a11y_xml.c, a11y_json.c) then serialise it.
 */
#ifndef SBX_DESKTOP_A11Y_INT_H
#define SBX_DESKTOP_A11Y_INT_H

#include <dbus/dbus.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "desktop/a11y.h"

#define A11Y_NONE         UINT32_MAX
#define A11Y_FLIGHT_BITS  12 /* at most 4096 calls in flight; the serial's low bits index them */
#define A11Y_FLIGHT_SLOTS (1u << A11Y_FLIGHT_BITS)

/* AT-SPI roles and states that the walk itself looks at (the full tables: a11y_names.c). */
#define A11Y_ROLE_EXTENDED             70
#define A11Y_ROLE_TABLE                55
#define A11Y_ROLE_DOCUMENT_SPREADSHEET 92
#define A11Y_STATE_SHOWING             25
#define A11Y_STATE_MANAGES_DESCENDANTS 31
#define A11Y_STATE_VISIBLE             30
#define A11Y_STATE_COUNT               44 /* pyatspi names 0..43 */

enum a11y_iface {
    A11Y_IF_ACCESSIBLE = 1u << 0,
    A11Y_IF_ACTION = 1u << 1,
    A11Y_IF_COMPONENT = 1u << 2,
    A11Y_IF_IMAGE = 1u << 3,
    A11Y_IF_SELECTION = 1u << 4,
    A11Y_IF_TABLE = 1u << 5,
    A11Y_IF_TEXT = 1u << 6,
    A11Y_IF_VALUE = 1u << 7,
};

enum a11y_node_flag {
    A11Y_NF_BASIC = 1u << 0,       /* role, name, states, interfaces, child count known */
    A11Y_NF_BASIC_ASKED = 1u << 1, /* the calls for them are queued or answered */
    A11Y_NF_KIDS = 1u << 2,        /* children list final */
    A11Y_NF_KIDS_ASKED = 1u << 3,
    A11Y_NF_GONE = 1u << 4,        /* the object vanished (an error answered for it): left out */
    A11Y_NF_DETAILS = 1u << 5,     /* detail calls queued */
    A11Y_NF_EXTENTS = 1u << 6,     /* ext[] valid */
    A11Y_NF_CACHED = 1u << 7,      /* came from Cache.GetItems */
    A11Y_NF_CALC_DONE = 1u << 8,   /* a Calc table's showing cells are known */
    A11Y_NF_CELL_STATE = 1u << 9,  /* a Calc cell's states are known */
    A11Y_NF_COUNT_ASKED = 1u << 10 /* ChildCount asked (objects that manage descendants) */
};

struct a11y_kv {
    const char *k, *v;
};

struct a11y_action {
    const char *name, *desc, *kb;
};

struct a11y_node {
    uint32_t bus; /* index into ctx->buses */
    uint32_t flags;
    const char *path;
    const char *name, *desc, *text;
    const char *role_name; /* from GetRoleName, for roles without a table entry */
    uint64_t states;
    uint32_t role, ifaces;
    int32_t child_count;
    uint32_t parent;         /* from the cache (placement), else A11Y_NONE */
    int32_t index_in_parent; /* from the cache */
    uint32_t *kids;          /* nkids entries, A11Y_NONE where unknown */
    uint32_t nkids;
    uint32_t seen;        /* walk pass that last reached it (duplicates and cycles are cut) */
    uint32_t tree_parent; /* who reached it in that pass, and as which child */
    uint32_t tree_slot;
    uint16_t wait_basic;    /* basic calls unanswered */
    uint16_t wait_kids;     /* GetChildAtIndex calls unanswered */
    int32_t ext[4];         /* x, y, width, height (screen) */
    double val[4];          /* current, min, max, step */
    uint8_t val_mask;       /* which val[] are set */
    struct a11y_calc *calc; /* a Calc table's scan (a11y_calc.c) */
    uint16_t nattrs, nactions;
    struct a11y_kv *attrs;
    struct a11y_action *actions;
};

struct a11y_bus {
    const char *name; /* unique bus name of the application (or the registry) */
    uint32_t inflight;
    uint64_t last_ns; /* last answer, or when the first call of a quiet spell went out */
    bool dead;
    DBusConnection *p2p; /* a direct connection to the application, when it offers one */
    const char *p2p_addr;
    uint32_t pid; /* the application's pid, as the bus daemon knows it */
};

struct a11y_call {
    uint32_t serial; /* 0: free slot */
    uint32_t node;
    uint32_t bus;
    uint16_t kind;
    int32_t arg;
};

enum a11y_kind {
    A11Y_K_APPS,        /* registry: the desktop's children */
    A11Y_K_CACHE,       /* Cache.GetItems */
    A11Y_K_NAME,        /* Properties.Get(Accessible, Name) (GetAll crashes atk-bridge apps) */
    A11Y_K_DESC,        /* Properties.Get(Accessible, Description) */
    A11Y_K_COUNT,       /* Properties.Get(Accessible, ChildCount) */
    A11Y_K_ROLE,        /* GetRole */
    A11Y_K_ROLE_NAME,   /* GetRoleName (roles without a table entry) */
    A11Y_K_STATE,       /* GetState */
    A11Y_K_IFACES,      /* GetInterfaces */
    A11Y_K_CHILDREN,    /* GetChildren */
    A11Y_K_CHILD_AT,    /* GetChildAtIndex(arg) */
    A11Y_K_ATTRS,       /* GetAttributes */
    A11Y_K_EXTENTS,     /* Component.GetExtents(screen) */
    A11Y_K_TEXT,        /* Text.GetText(0, -1) */
    A11Y_K_VALUE,       /* Properties.Get(Value, arg: 0 current, 1 min, 2 max, 3 step) */
    A11Y_K_ACTIONS,     /* Action.GetActions: count, descriptions, key bindings */
    A11Y_K_ACTION_NAME, /* Action.GetName(arg): GetActions has the localized name ("" in Chromium)
                         */
    A11Y_K_REGISTER,   /* Registry.RegisterEvent: makes atk-bridge applications serve their cache */
    A11Y_K_P2P_ADDR,   /* Application.GetApplicationBusAddress */
    A11Y_K_PID,        /* bus daemon: GetConnectionUnixProcessID(the application's name) */
    A11Y_K_NCOLS,      /* Properties.Get(Table, NColumns) */
    A11Y_K_CALC_CELL,  /* Calc: GetChildAtIndex(arg) of a table */
    A11Y_K_CALC_STATE, /* Calc: GetState of a cell */
};

struct a11y_arena_chunk;
struct a11y_calc;

struct a11y_ctx {
    struct sbx_a11y_opts o; /* defaults filled in */
    struct sbx_a11y_stats *st;
    DBusConnection *conn;
    uint64_t deadline_ns;
    char note[SBX_A11Y_NOTE_MAX];

    struct a11y_arena_chunk *arena;
    size_t str_bytes, str_budget; /* strings kept from answers, and their bound (0: none) */
    bool strings_cut;

    struct a11y_node *nodes;
    size_t nnodes, capnodes;
    uint32_t *hash; /* open addressing: node index + 1, 0 = empty */
    size_t hcap;

    struct a11y_bus *buses;
    size_t nbuses, capbuses;
    uint32_t *apps; /* the applications' root nodes, in the registry's order */
    size_t napps;

    struct a11y_call *queue; /* calls not sent yet (serial unused) */
    size_t qlen, qcap, qhead;
    struct a11y_call flight[A11Y_FLIGHT_SLOTS];
    uint32_t inflight;
    uint32_t seq; /* high bits of the next serial */
    uint32_t free_slot;

    uint32_t pass; /* walk pass number (node->seen) */
    size_t reached;
    bool cut; /* max_nodes reached */
    bool calc_pending;
};

/* a11y_store.c */
void *a11y_alloc(struct a11y_ctx *c, size_t n);
/* Strings from answers, within the snapshot's budget ("" past it). */
const char *a11y_strdup(struct a11y_ctx *c, const char *s, size_t n);
bool a11y_budget(struct a11y_ctx *c, size_t n);
void a11y_store_free(struct a11y_ctx *c);
uint32_t a11y_bus_index(struct a11y_ctx *c, const char *name);
/* The node for (bus, path), made when new; A11Y_NONE for AT-SPI's null object. */
uint32_t a11y_node_get(struct a11y_ctx *c, uint32_t bus, const char *path);
void a11y_note(struct a11y_ctx *c, const char *text);

/* a11y_bus.c */
int a11y_connect(struct a11y_ctx *c, const char *address, sbx_error **err);
void a11y_disconnect(struct a11y_ctx *c);
void a11y_queue(struct a11y_ctx *c, enum a11y_kind kind, uint32_t node, int32_t arg);
/* Send every queued call (and those queued by the replies) and dispatch the replies, until
 * nothing is queued or in flight. -SBX_ETIMEDOUT past the deadline, -SBX_EIO when the bus
 * itself goes away. */
int a11y_pump(struct a11y_ctx *c, sbx_error **err);
void a11y_kill_bus(struct a11y_ctx *c, uint32_t bus, const char *why);
/* Open the direct connection the application offered (p2p_addr), if its peer is the pid the bus
 * daemon named; otherwise its calls keep going through the bus. */
void a11y_open_p2p(struct a11y_ctx *c, uint32_t bus);

/* a11y_walk.c */
void a11y_on_reply(struct a11y_ctx *c, const struct a11y_call *call, DBusMessage *m);
void a11y_on_error(struct a11y_ctx *c, const struct a11y_call *call, const char *name,
                   const char *msg);
int a11y_walk(struct a11y_ctx *c, sbx_error **err);
/* An object reference (so) read from an answer: its node, or A11Y_NONE (null or malformed). */
uint32_t a11y_iter_ref(struct a11y_ctx *c, DBusMessageIter *it);
int a11y_details(struct a11y_ctx *c, sbx_error **err);
/* Whether the writers show this child of a walked node (reached in the last pass, not gone). */
bool a11y_shown(const struct a11y_ctx *c, uint32_t parent, uint32_t slot);

/* a11y_calc.c: LibreOffice Calc tables, walked by their showing cells as OSWorld does. */
void a11y_calc_step(struct a11y_ctx *c, uint32_t table);
void a11y_calc_on_cell(struct a11y_ctx *c, const struct a11y_call *call, DBusMessage *m);
void a11y_calc_free(struct a11y_ctx *c);

/* a11y_names.c */
const char *a11y_role_tag(uint32_t role);  /* "push-button"; NULL when not in the table */
const char *a11y_state_name(unsigned bit); /* "enabled", "multi_line"; NULL past the table */
uint32_t a11y_iface_bit(const char *name);
/* Python's str(float): "0.0", "100.0", "1e-05", "inf". buf >= 32 bytes. */
void a11y_pyfloat(double v, char *buf, size_t n);
/* An XML name made from an application's string (attribute keys, action names). */
void a11y_xml_name(const char *s, struct sbx_buf *b, sbx_error **err);

/* a11y_xml.c, a11y_json.c */
int a11y_write_xml(struct a11y_ctx *c, struct sbx_buf *out, sbx_error **err);
int a11y_write_json(struct a11y_ctx *c, struct sbx_buf *out, sbx_error **err);

#endif
