// Does a primary-context reset free page-locked host memory under the program?
//
// Allocates pinned memory three ways (plain, portable, mapped + portable), writes it, resets the
// device's primary context, then reads the host pointer in a forked child and reports whether
// the child was killed. This is why berth refuses a reset while host buffers of the context
// live (docs/design-notes.md, "Faults poison the process").
//
//   nvcc -O1 -o reset_frees_pinned reset_frees_pinned.cu -lcuda && ./reset_frees_pinned
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <sys/wait.h>
#include <unistd.h>

int main() {
  if (cudaFree(0) != cudaSuccess) { printf("no GPU\n"); return 1; }
  const struct { int flags; const char *name; } kinds[] = {
      {cudaHostAllocDefault, "pinned"},
      {cudaHostAllocPortable, "pinned, portable"},
      {cudaHostAllocMapped | cudaHostAllocPortable, "pinned, mapped, portable"},
  };
  for (const auto &k : kinds) {
    volatile int *p = nullptr;
    if (cudaHostAlloc((void **)&p, 1 << 20, k.flags) != cudaSuccess) { printf("cudaHostAlloc failed\n"); return 1; }
    p[0] = 42;
    CUdevice d;
    cuDeviceGet(&d, 0);
    CUresult r = cuDevicePrimaryCtxReset(d);
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) { int v = p[0]; printf("  (child read %d)\n", v); fflush(stdout); _exit(0); }
    int st = 0;
    waitpid(c, &st, 0);
    printf("%-26s reset: %s; reading it afterwards: %s\n", k.name, r == CUDA_SUCCESS ? "ok" : "failed",
           WIFSIGNALED(st) ? (WTERMSIG(st) == 11 ? "killed by SIGSEGV" : "killed by a signal") : "read fine");
    cudaFree(0);  // a fresh primary context for the next kind
  }
  return 0;
}
