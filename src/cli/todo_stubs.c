/* todo_stubs.c — temporary: commands not written yet. */
#include "cli/cmds.h"
#include "cli/common.h"
#define STUB(f) int f(int argc, char **argv) { (void)argc; (void)argv; st_cli_errorf("not yet"); return 1; }
STUB(st_cli_proxy)
