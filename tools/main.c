/* pinloader: the command-line tool. Uses only the public API. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
  fprintf(f,
          "usage: pinloader <command> [options]\n"
          "\n"
          "commands:\n"
          "  run     load epochs of a data set and report throughput\n"
          "  bench   measure copies, overlap and the loader on this machine\n"
          "  version print the library version\n"
          "\n"
          "`pinloader <command> --help` describes a command's options.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "run"))
    return pl_cmd_run(argc - 1, argv + 1);
  if (!strcmp(cmd, "bench"))
    return pl_cmd_bench(argc - 1, argv + 1);
  if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
    printf("pinloader %s\n", pl_version_string());
    return 0;
  }
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
    usage(stdout);
    return 0;
  }
  fprintf(stderr, "pinloader: unknown command '%s'\n", cmd);
  usage(stderr);
  return 2;
}
