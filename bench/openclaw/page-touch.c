// What this host charges for the first touch of a page (docs/decisions/0049-...): a checkpointed agent's restore
// writes every page of its image into fresh memory, so its time is about this figure times the image's pages.
//   gcc -O2 -o /tmp/page-touch bench/openclaw/page-touch.c && /tmp/page-touch [MB, default 600]
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static char *fresh(size_t n) {
  char *p = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) { perror("mmap"); exit(1); }
  return p;
}

int main(int argc, char **argv) {
  size_t mb = argc > 1 ? strtoul(argv[1], 0, 10) : 600, n = mb << 20, pages = n / 4096;
  // 1. A store to each page of fresh memory: one page fault each.
  char *a = fresh(n);
  double t0 = now();
  for (size_t i = 0; i < n; i += 4096) a[i] = 1;
  double t1 = now();
  memset(a, 2, n); // the same pages again, now mapped: the floor
  double t2 = now();
  // 2. The pages allocated by the kernel first (no fault), then touched: what a fault costs beyond the allocation.
  char *b = fresh(n);
  double t3 = now();
  madvise(b, n, MADV_POPULATE_WRITE);
  double t4 = now();
  memset(b, 2, n);
  double t5 = now();
  // 3. What CRIU's restore does: read a file (here from a tmpfs) into fresh memory.
  char path[] = "/dev/shm/page-touch-XXXXXX";
  int fd = mkstemp(path);
  unlink(path);
  if (fd < 0 || ftruncate(fd, n) || pwrite(fd, a, n, 0) != (ssize_t)n) { perror("tmpfs"); return 1; }
  char *c = fresh(n);
  double t6 = now();
  for (size_t off = 0; off < n;) {
    ssize_t k = pread(fd, c + off, n - off, off);
    if (k <= 0) break;
    off += k;
  }
  double t7 = now();
  printf("%zu MB: first touch %.0f ms (%.1f us a page), touched again %.0f ms; allocated first %.0f ms, then touched "
         "%.0f ms; read from a tmpfs into fresh memory %.0f ms\n",
         mb, t1 - t0, (t1 - t0) * 1e3 / pages, t2 - t1, t4 - t3, t5 - t4, t7 - t6);
  return 0;
}
