/*
 * format.h - `--format` of `sbx ls` and `sbx inspect` (docker's --format, a small subset of
 * Go templates, over each sandbox's JSON as the server sends it):
 *
 *   json                         one compact JSON object per line (JSON lines)
 *   TEMPLATE                     text with {{.ID}} {{.Name}} {{.State}} {{.Reason}}
 *                                {{.Message}} {{.Image}} {{.Provider}} {{.Created}}
 *                                {{.Expires}} {{.Entrypoint}} {{.Metadata}} (k=v,k=v)
 *                                {{.Metadata.KEY}} {{.}}; `json` before a field gives its
 *                                JSON ({{json .Metadata}}); \t \n \\ are escapes
 *   table TEMPLATE               the same, after a header line of the field names
 */
#ifndef SBX_CLI_FORMAT_H
#define SBX_CLI_FORMAT_H

#include <stdio.h>

/* 0, or -1 with *err (caller frees) saying what is wrong with fmt. */
int sbx_cli_format_check(const char *fmt, char **err);
/* The header line of a `table ` format (nothing otherwise). */
void sbx_cli_format_header(FILE *out, const char *fmt);
/* One sandbox (its JSON) through a checked format, and a newline. */
void sbx_cli_format_one(FILE *out, const char *fmt, const char *sandbox_json);

#endif
