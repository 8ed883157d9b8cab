/*
 * a11y_names.c - AT-SPI's role and state names as OSWorld writes them, interface bits, and
 * the small formatting rules of its XML (Python's str(float), names made XML-safe).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "desktop/a11y_int.h"

/* AtspiRole (atspi-constants.h), as libatspi names them with spaces turned into '-': the tag
 * OSWorld writes. 70 (extended) and unknown numbers are asked with GetRoleName. */
static const char *const roles[] = {
    "invalid",
    "accelerator-label",
    "alert",
    "animation",
    "arrow",
    "calendar",
    "canvas",
    "check-box",
    "check-menu-item",
    "color-chooser",
    "column-header",
    "combo-box",
    "date-editor",
    "desktop-icon",
    "desktop-frame",
    "dial",
    "dialog",
    "directory-pane",
    "drawing-area",
    "file-chooser",
    "filler",
    "focus-traversable",
    "font-chooser",
    "frame",
    "glass-pane",
    "html-container",
    "icon",
    "image",
    "internal-frame",
    "label",
    "layered-pane",
    "list",
    "list-item",
    "menu",
    "menu-bar",
    "menu-item",
    "option-pane",
    "page-tab",
    "page-tab-list",
    "panel",
    "password-text",
    "popup-menu",
    "progress-bar",
    "push-button",
    "radio-button",
    "radio-menu-item",
    "root-pane",
    "row-header",
    "scroll-bar",
    "scroll-pane",
    "separator",
    "slider",
    "spin-button",
    "split-pane",
    "status-bar",
    "table",
    "table-cell",
    "table-column-header",
    "table-row-header",
    "tearoff-menu-item",
    "terminal",
    "text",
    "toggle-button",
    "tool-bar",
    "tool-tip",
    "tree",
    "tree-table",
    "unknown",
    "viewport",
    "window",
    NULL /* extended */,
    "header",
    "footer",
    "paragraph",
    "ruler",
    "application",
    "autocomplete",
    "editbar",
    "embedded",
    "entry",
    "chart",
    "caption",
    "document-frame",
    "heading",
    "page",
    "section",
    "redundant-object",
    "form",
    "link",
    "input-method-window",
    "table-row",
    "tree-item",
    "document-spreadsheet",
    "document-presentation",
    "document-text",
    "document-web",
    "document-email",
    "comment",
    "list-box",
    "grouping",
    "image-map",
    "notification",
    "info-bar",
    "level-bar",
    "title-bar",
    "block-quote",
    "audio",
    "video",
    "definition",
    "article",
    "landmark",
    "log",
    "marquee",
    "math",
    "rating",
    "timer",
    "static",
    "math-fraction",
    "math-root",
    "subscript",
    "superscript",
    "description-list",
    "description-term",
    "description-value",
    "footnote",
    "content-deletion",
    "content-insertion",
    "mark",
    "suggestion",
    "push-button-menu",
};

const char *
a11y_role_tag(uint32_t role)
{
    return role < sizeof(roles) / sizeof(roles[0]) ? roles[role] : NULL;
}

/* AtspiStateType; OSWorld writes pyatspi's STATE_X name lowercased after the first '_'. */
static const char *const states[A11Y_STATE_COUNT] = {
    "invalid",         "active",
    "armed",           "busy",
    "checked",         "collapsed",
    "defunct",         "editable",
    "enabled",         "expandable",
    "expanded",        "focusable",
    "focused",         "has_tooltip",
    "horizontal",      "iconified",
    "modal",           "multi_line",
    "multiselectable", "opaque",
    "pressed",         "resizable",
    "selectable",      "selected",
    "sensitive",       "showing",
    "single_line",     "stale",
    "transient",       "vertical",
    "visible",         "manages_descendants",
    "indeterminate",   "required",
    "truncated",       "animated",
    "invalid_entry",   "supports_autocompletion",
    "selectable_text", "is_default",
    "visited",         "checkable",
    "has_popup",       "read_only",
};

const char *
a11y_state_name(unsigned bit)
{
    return bit < A11Y_STATE_COUNT ? states[bit] : NULL;
}

uint32_t
a11y_iface_bit(const char *name)
{
    static const struct {
        const char *name;
        uint32_t bit;
    } map[] = {
        {"Accessible", A11Y_IF_ACCESSIBLE},
        {"Action", A11Y_IF_ACTION},
        {"Component", A11Y_IF_COMPONENT},
        {"Image", A11Y_IF_IMAGE},
        {"Selection", A11Y_IF_SELECTION},
        {"Table", A11Y_IF_TABLE},
        {"Text", A11Y_IF_TEXT},
        {"Value", A11Y_IF_VALUE},
    };
    static const char prefix[] = "org.a11y.atspi.";
    if (strncmp(name, prefix, sizeof(prefix) - 1) != 0)
        return 0;
    name += sizeof(prefix) - 1;
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(name, map[i].name) == 0)
            return map[i].bit;
    return 0;
}

/* The shortest digits that read back as v: "d.ddde[+-]x" split into digits and exponent. */
static int
shortest(double v, char *digits, size_t n, int *exp10)
{
    char tmp[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, v);
        if (strtod(tmp, NULL) == v || prec == 17)
            break;
    }
    const char *e = strchr(tmp, 'e');
    *exp10 = e ? (int)strtol(e + 1, NULL, 10) : 0;
    size_t k = 0;
    for (const char *p = tmp; p < e && k + 1 < n; p++)
        if (*p >= '0' && *p <= '9')
            digits[k++] = *p;
    while (k > 1 && digits[k - 1] == '0')
        k--;
    digits[k] = '\0';
    return (int)k;
}

static void
fixed(const char *d, int nd, int point, char *out, size_t n)
{
    size_t o = 0;
#define PUT(ch) (o + 1 < n ? (void)(out[o++] = (ch)) : (void)0)
    if (point <= 0) {
        PUT('0');
        PUT('.');
        for (int i = 0; i < -point; i++)
            PUT('0');
        for (int i = 0; i < nd; i++)
            PUT(d[i]);
    } else {
        for (int i = 0; i < point; i++)
            PUT(i < nd ? d[i] : '0');
        PUT('.');
        if (point >= nd)
            PUT('0');
        for (int i = point; i < nd; i++)
            PUT(d[i]);
    }
#undef PUT
    out[o] = '\0';
}

void
a11y_pyfloat(double v, char *buf, size_t n)
{
    if (isnan(v)) {
        snprintf(buf, n, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, n, v < 0 ? "-inf" : "inf");
        return;
    }
    const char *sign = signbit(v) ? "-" : "";
    char d[24];
    char body[48];
    int e;
    int nd = shortest(fabs(v), d, sizeof(d), &e);
    int point = e + 1; /* digits before the decimal point */
    if (v == 0) {
        snprintf(buf, n, "%s0.0", sign);
        return;
    }
    if (point > -4 && point <= 16) {
        fixed(d, nd, point, body, sizeof(body));
        snprintf(buf, n, "%s%s", sign, body);
    } else if (nd > 1) {
        snprintf(buf, n, "%s%c.%se%c%02d", sign, d[0], d + 1, e < 0 ? '-' : '+', abs(e));
    } else {
        snprintf(buf, n, "%s%ce%c%02d", sign, d[0], e < 0 ? '-' : '+', abs(e));
    }
}

static bool
name_char(unsigned char ch, bool first)
{
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_')
        return true;
    return !first && ((ch >= '0' && ch <= '9') || ch == '-' || ch == '.');
}

void
a11y_xml_name(const char *s, struct sbx_buf *b, sbx_error **err)
{
    /* lxml refuses names that are not XML names (OSWorld then loses the node); we write what
     * is not a name character as '_' instead, and spaces as '-' (OSWorld's rule for roles and
     * actions). */
    if (*s && !name_char((unsigned char)*s, true))
        (void)sbx_buf_append(b, "_", 1, err);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char ch = '_';
        if (*p == ' ')
            ch = '-';
        else if (name_char(*p, false))
            ch = (char)*p;
        (void)sbx_buf_append(b, &ch, 1, err);
    }
}
