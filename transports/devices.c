/*
 * devices.c — whether the kernel shows RDMA or fabric hardware, read from
 * sysfs and /dev without loading any library: the default transport
 * selection asks this before it loads the ib or ofi module (select.h).
 */
#include "select.h"

#include <dirent.h>
#include <glob.h>
#include <stdio.h>

/* The first entry of a sysfs class directory (not "." or ".."), or 0. */
static int first_entry(const char *dir, char *what, size_t len, const char *label) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return 0;
  struct dirent *e;
  int found = 0;
  while (!found && (e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') {
      snprintf(what, len, "%s %.64s", label, e->d_name);
      found = 1;
    }
  closedir(d);
  return found;
}

static int first_match(const char *pattern, char *what, size_t len) {
  glob_t g;
  int found = glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0;
  if (found)
    snprintf(what, len, "%.64s", g.gl_pathv[0]);
  globfree(&g);
  return found;
}

int loom_rdma_device_visible(char *what, size_t len) {
  return first_entry("/sys/class/infiniband", what, len, "RDMA device");
}

int loom_fabric_device_visible(char *what, size_t len) {
  return loom_rdma_device_visible(what, len) ||
         first_entry("/sys/class/cxi", what, len, "Slingshot device") ||
         first_match("/dev/cxi[0-9]*", what, len) || first_match("/dev/hfi1_[0-9]*", what, len);
}
