/*
 * keys.c - key names to X keysyms, for the names agents send:
 *   - pyautogui's KEYBOARD_KEYS (OSWorld's computer_13 PRESS/HOTKEY/KEY_DOWN/KEY_UP), mapped as
 *     pyautogui's X11 backend maps them ("ctrl" -> Control_L, "win" -> Super_L, "num0" -> KP_0,
 *     "pgdn" -> Page_Down); the names that backend leaves unmapped (media and browser keys, IME
 *     keys, macOS names) get the XF86 or IME keysym of the same key, so they do something;
 *   - xdotool's names and aliases (Anthropic's computer-use "key" action: "ctrl+shift+t",
 *     "Return", "Page_Down", "super");
 *   - every X keysym name (keysymdef.h, XF86keysym.h; table generated at build time);
 *   - one character ("a", "A", "<", "é"): its own keysym.
 * Names are matched exactly first, then without case.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "desktop/desktop_int.h"

struct keyname {
    const char *name;
    uint32_t sym;
};

static const struct keyname x_keysyms[] = {
#include "keysyms.inc"
};

/* pyautogui's names and xdotool's aliases (both lower case; looked up without case). */
static const struct keyname aliases[] = {
    {"backspace", 0xff08},
    {"tab", 0xff09},
    {"enter", 0xff0d},
    {"return", 0xff0d},
    {"shift", 0xffe1},
    {"ctrl", 0xffe3},
    {"control", 0xffe3},
    {"alt", 0xffe9},
    {"pause", 0xff13},
    {"capslock", 0xffe5},
    {"esc", 0xff1b},
    {"escape", 0xff1b},
    {"pgup", 0xff55},
    {"pgdn", 0xff56},
    {"pageup", 0xff55},
    {"pagedown", 0xff56},
    {"end", 0xff57},
    {"home", 0xff50},
    {"left", 0xff51},
    {"up", 0xff52},
    {"right", 0xff53},
    {"down", 0xff54},
    {"select", 0xff60},
    {"print", 0xff61},
    {"execute", 0xff62},
    {"prtsc", 0xff61},
    {"prtscr", 0xff61},
    {"prntscrn", 0xff61},
    {"printscreen", 0xff61},
    {"insert", 0xff63},
    {"del", 0xffff},
    {"delete", 0xffff},
    {"help", 0xff6a},
    {"win", 0xffeb},
    {"winleft", 0xffeb},
    {"winright", 0xffec},
    {"super", 0xffeb},
    {"meta", 0xffe7},
    {"cmd", 0xffeb},
    {"command", 0xffeb},
    {"option", 0xffe9},
    {"optionleft", 0xffe9},
    {"optionright", 0xffea},
    {"apps", 0xff67},
    {"menu", 0xff67},
    {"num0", 0xffb0},
    {"num1", 0xffb1},
    {"num2", 0xffb2},
    {"num3", 0xffb3},
    {"num4", 0xffb4},
    {"num5", 0xffb5},
    {"num6", 0xffb6},
    {"num7", 0xffb7},
    {"num8", 0xffb8},
    {"num9", 0xffb9},
    {"multiply", 0xffaa},
    {"add", 0xffab},
    {"separator", 0xffac},
    {"subtract", 0xffad},
    {"decimal", 0xffae},
    {"divide", 0xffaf},
    {"numlock", 0xff7f},
    {"scrolllock", 0xff14},
    {"shiftleft", 0xffe1},
    {"shiftright", 0xffe2},
    {"ctrlleft", 0xffe3},
    {"ctrlright", 0xffe4},
    {"altleft", 0xffe9},
    {"altright", 0xffea},
    {"space", 0x20},
    {"clear", 0xff0b},
    {"convert", 0xff23},
    {"nonconvert", 0xff22},
    {"modechange", 0xff7e},
    {"kanji", 0xff21},
    {"kana", 0xff2d},
    {"hangul", 0xff31},
    {"hanguel", 0xff31},
    {"hanja", 0xff34},
    {"junja", 0xff38},
    {"final", 0xff33},
    {"yen", 0xa5},
    {"browserback", 0x1008ff26},
    {"browserforward", 0x1008ff27},
    {"browserrefresh", 0x1008ff29},
    {"browserstop", 0x1008ff28},
    {"browsersearch", 0x1008ff1b},
    {"browserfavorites", 0x1008ff30},
    {"browserhome", 0x1008ff18},
    {"volumemute", 0x1008ff12},
    {"volumedown", 0x1008ff11},
    {"volumeup", 0x1008ff13},
    {"nexttrack", 0x1008ff17},
    {"prevtrack", 0x1008ff16},
    {"stop", 0x1008ff15},
    {"playpause", 0x1008ff14},
    {"launchmail", 0x1008ff19},
    {"launchmediaselect", 0x1008ff32},
    {"launchapp1", 0x1008ff33},
    {"launchapp2", 0x1008ff1d},
    {"sleep", 0x1008ff2f},
    {"fn", 0x100811d0},
    /* "accept" (VK_ACCEPT, an IME key) has no X keysym: a no-op, as in pyautogui on X11 */
    {"accept", 0},
};

static const struct keyname *
find(const struct keyname *t, size_t n, const char *name, bool nocase)
{
    for (size_t i = 0; i < n; i++) {
        if (nocase ? strcasecmp(t[i].name, name) == 0 : strcmp(t[i].name, name) == 0)
            return &t[i];
    }
    return NULL;
}

/* One UTF-8 character (the whole string), or 0. */
static uint32_t
single_char(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t len = strlen(s);
    if (len == 1)
        return p[0];
    int n = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc0 ? 2 : 0;
    if (n == 0 || (size_t)n != len)
        return 0;
    uint32_t v = p[0] & (0x7f >> n);
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (p[i] & 0x3f);
    }
    return v;
}

int
sbx_desktop_key_lookup(const char *name, uint32_t *keysym, sbx_error **err)
{
    if (!name || !*name)
        return sbx_error_set(err, SBX_EINVAL, 0, "empty key name");
    uint32_t cp = single_char(name);
    if (cp) {
        *keysym = desk_char_keysym(cp);
        return 0;
    }
    const struct keyname *k = find(aliases, SBX_ARRAY_SIZE(aliases), name, true);
    if (!k)
        k = find(x_keysyms, SBX_ARRAY_SIZE(x_keysyms), name, false);
    if (!k)
        k = find(x_keysyms, SBX_ARRAY_SIZE(x_keysyms), name, true);
    if (k) {
        *keysym = k->sym;
        return 0;
    }
    if (strncasecmp(name, "0x", 2) == 0 && strlen(name) <= 10 && name[2]) {
        char *end = NULL;
        unsigned long v = strtoul(name + 2, &end, 16);
        if (end && !*end && v) {
            *keysym = (uint32_t)v;
            return 0;
        }
    }
    return sbx_error_set(err, SBX_EINVAL, 0,
                         "unknown key `%.64s` (pyautogui's KEYBOARD_KEYS, an X keysym name, or "
                         "one character)",
                         name);
}
