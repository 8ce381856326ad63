/*
 * loom-info — prints Loom's version, what was built in, and every LOOM_*
 * variable with its current value, default and meaning, the device
 * backends built, and the modules (transports, the CUDA device backend):
 * which were built and where Loom looks for them (none is loaded here).
 */
#include "config.h"
#include "core/config.h"
#include "loom.h"
#include "module_loader.h"
#include "device/device.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *out) {
  fprintf(out, "usage: loom-info [--vars-only] [-h]\n"
               "Prints the library version, the features built in and every LOOM_*\n"
               "environment variable with its value (\"*\" marks those set).\n");
}

/* The modules, each with the file Loom would load, without loading it. */
static void print_modules(void) {
  const char *source;
  const char *dirs = loom_module_search_path(&source);
  printf("modules (loaded only when used: transports when chosen, a device backend at its "
         "first use), searched in %s (%s):\n", dirs, source);
  for (int i = 0; loom_module_at(i) != NULL; i++) {
    const struct loom_module_info *m = loom_module_at(i);
    char path[PATH_MAX];
    if (!m->built)
      printf("  %-4s %-20s not built (configure found no %s)\n", m->name, m->file, m->library);
    else if (loom_module_locate(m, path, sizeof path) == 0)
      printf("  %-4s %-20s %s (needs %s)\n", m->name, m->file, path, m->library);
    else
      printf("  %-4s %-20s built, but not found there (needs %s)\n", m->name, m->file,
             m->library);
  }
  printf("\n");
}

int main(int argc, char **argv) {
  int vars_only = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--vars-only") == 0) {
      vars_only = 1;
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (!vars_only) {
    int version = 0;
    loomGetVersion(&version);
    printf("Loom %d.%d.%d (version code %d, header %d)\n", version / 10000,
           (version / 100) % 100, version % 100, version, LOOM_VERSION_CODE);
    printf("built in: %s\n", LOOM_FEATURES);
    printf("devices: %s\n", loom_devices_built());
    printf("configure found: %s\n\n", LOOM_DETECTED);
    print_modules();
    printf("Environment variables (* = set in this environment):\n");
  }
  const struct loom_param_info *table = loom_param_table();
  for (int i = 0; i < LOOM_PARAM_COUNT; i++) {
    const struct loom_param_info *p = &table[i];
    const char *value = loom_param_str((loom_param_id)i);
    printf("%c %-24s = %-16s (default %s)\n", loom_param_is_set((loom_param_id)i) ? '*' : ' ',
           p->name, value ? value : "(unset)", p->default_value ? p->default_value : "unset");
    printf("      %s\n", p->help);
  }
  return 0;
}
