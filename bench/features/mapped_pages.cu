// Random row gathers from a host table read in place (mapped), by the page size behind the
// table: pinned by the driver (cudaHostAlloc) or allocated by the process, backed by
// transparent huge pages (madvise) or not, then registered (cudaHostRegister). Also the
// host's threads gathering the same rows. One JSON line per case.
//
// Also host memory allocated through the driver's virtual memory management (cuMemCreate on
// the host, mapped with the allocation granularity) and managed memory kept on the host
// (preferred location the CPU, accessed by the GPU), with and without MADV_HUGEPAGE.
//
// Each case times the gather kernel twice: back to back (ids already on the device, events
// around the launches: what the link and the table's mappings allow), and one batch at a time
// (ids copied from pageable memory, the kernel, a wait: what a program that uses each batch
// before the next sees).
//
//   nvcc -O3 -arch=sm_90 -Xcompiler -fopenmp mapped_pages.cu -o mapped_pages -lcuda
//   ./mapped_pages [GiB ...]        (default: 2 16 64)
//   ONLY_MANAGED=1 ./mapped_pages 64   (managed memory only)
#include <cuda.h>
#include <cuda_runtime.h>
#include <omp.h>
#include <sys/mman.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#define CK(x)                                                                       \
  do {                                                                              \
    cudaError_t e = (x);                                                            \
    if (e != cudaSuccess) {                                                         \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

constexpr int W4 = 32;  // 128 floats a row, as float4
constexpr size_t ROW = W4 * sizeof(float4);

// One warp a row: lane l copies the row's l-th 16 bytes.
__global__ void gather(const float4* __restrict__ table, const unsigned* __restrict__ ids,
                       float4* __restrict__ out, int n) {
  long t = blockIdx.x * (long)blockDim.x + threadIdx.x;
  long r = t / W4;
  int l = t % W4;
  if (r < n) out[r * W4 + l] = table[(size_t)ids[r] * W4 + l];
}

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

static void bench(const char* kind, float4* host, size_t rows, double gib, const char* thp,
                  bool host_reads = true) {
  const int n = 65536, reps = 20;
  std::mt19937_64 rng(1);
  std::vector<unsigned> ids((size_t)n * reps);
  for (auto& x : ids) x = rng() % rows;
  unsigned* d_ids;
  float4* d_out;
  CK(cudaMalloc(&d_ids, ids.size() * 4));
  CK(cudaMalloc(&d_out, (size_t)n * ROW));
  CK(cudaMemcpy(d_ids, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
  float4* dev_table = host;
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, host) == cudaSuccess && attr.devicePointer)
    dev_table = (float4*)attr.devicePointer;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  int threads = 256, blocks = (int)(((long)n * W4 + threads - 1) / threads);
  // Warm: two passes over other ids.
  for (int k = 0; k < 2; k++) gather<<<blocks, threads>>>(dev_table, d_ids + k * n, d_out, n);
  CK(cudaDeviceSynchronize());
  CK(cudaEventRecord(a));
  for (int k = 0; k < reps; k++) gather<<<blocks, threads>>>(dev_table, d_ids + k * n, d_out, n);
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float ms;
  CK(cudaEventElapsedTime(&ms, a, b));
  double gpu = (double)n * reps / (ms / 1e3) / 1e6;
  // One batch at a time, as a program that gathers a batch and then uses it does: the batch's
  // ids copied from pageable memory, the kernel, a wait. Wall time on the host.
  unsigned* d_batch;
  CK(cudaMalloc(&d_batch, (size_t)n * 4));
  double t_batch = now();
  for (int k = 0; k < reps; k++) {
    CK(cudaMemcpy(d_batch, ids.data() + (size_t)k * n, (size_t)n * 4, cudaMemcpyHostToDevice));
    gather<<<blocks, threads>>>(dev_table, d_batch, d_out, n);
    CK(cudaDeviceSynchronize());
  }
  double per_batch = (double)n * reps / (now() - t_batch) / 1e6;
  CK(cudaFree(d_batch));
  // Host threads gathering the same rows into pinned memory.
  float4* pinned;
  CK(cudaHostAlloc((void**)&pinned, (size_t)n * ROW, cudaHostAllocDefault));
  memset(pinned, 0, (size_t)n * ROW);
  double t0 = now();
  for (int k = 0; k < (host_reads ? reps : 0); k++) {
    const unsigned* batch = ids.data() + (size_t)k * n;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) memcpy(pinned + (size_t)i * W4, host + (size_t)batch[i] * W4, ROW);
  }
  double cpu = host_reads ? (double)n * reps / (now() - t0) / 1e6 : 0.0;
  printf("{\"impl\": \"cuda_mapped_gather\", \"table\": \"%s\", \"thp\": \"%s\", \"gib\": %.0f, "
         "\"batch\": %d, \"gpu_mapped_mrows_s\": %.1f, \"gpu_mapped_per_batch_mrows_s\": %.1f, "
         "\"host_threads\": %d, \"host_gather_mrows_s\": %.1f}\n",
         kind, thp, gib, n, gpu, per_batch, omp_get_max_threads(), cpu);
  fflush(stdout);
  CK(cudaFreeHost(pinned));
  CK(cudaFree(d_ids));
  CK(cudaFree(d_out));
}

static std::string thp_mode() {
  FILE* f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (!f) return "?";
  char buf[256] = {0};
  fgets(buf, sizeof buf, f);
  fclose(f);
  std::string s(buf);
  auto i = s.find('['), j = s.find(']');
  return i != std::string::npos && j != std::string::npos ? s.substr(i + 1, j - i - 1) : s;
}

// Fill in parallel (the first touch places the pages; with THP, 2 MiB at a time).
static void fill(float4* t, size_t rows) {
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < rows; r++)
    for (int l = 0; l < W4; l++) t[r * W4 + l] = make_float4(r, l, 0, 1);
}

static size_t anon_huge_kib() {
  FILE* f = fopen("/proc/meminfo", "r");
  char line[256];
  size_t kb = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "AnonHugePages: %zu kB", &kb) == 1) break;
  if (f) fclose(f);
  return kb;
}

int main(int argc, char** argv) {
  std::vector<double> sizes;
  for (int i = 1; i < argc; i++) sizes.push_back(atof(argv[i]));
  if (sizes.empty()) sizes = {2, 16, 64};
  CK(cudaSetDeviceFlags(cudaDeviceMapHost));
  std::string mode = thp_mode();
  fprintf(stderr, "THP: %s\n", mode.c_str());
  for (double gib : sizes) {
    size_t bytes = (size_t)(gib * (1ull << 30)), rows = bytes / ROW;
    // ONLY_MANAGED: managed memory alone (the kind a berth `ManagedBuffer` is).
    bool only_managed = getenv("ONLY_MANAGED") != nullptr;
    bool only_new = only_managed || getenv("ONLY_DRIVER_MANAGED") != nullptr;
    if (!only_new) {
      double t0 = now();
      float4* t;
      CK(cudaHostAlloc((void**)&t, bytes, cudaHostAllocMapped));
      fill(t, rows);
      fprintf(stderr, "cudaHostAlloc %.0f GiB: %.1f s\n", gib, now() - t0);
      bench("cudaHostAlloc", t, rows, gib, mode.c_str());
      CK(cudaFreeHost(t));
    }
    for (int huge = 0; huge < (only_new ? 0 : 2); huge++) {
      double t0 = now();
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) { perror("mmap"); exit(1); }
      madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
      size_t before = anon_huge_kib();
      fill((float4*)p, rows);
      size_t after = anon_huge_kib();
      CK(cudaHostRegister(p, bytes, cudaHostRegisterMapped));
      fprintf(stderr, "mmap %s %.0f GiB: %.1f s, %.1f GiB in huge pages\n",
              huge ? "MADV_HUGEPAGE" : "MADV_NOHUGEPAGE", gib, now() - t0,
              (after - before) / 1048576.0);
      bench(huge ? "mmap_madv_hugepage_registered" : "mmap_4k_registered", (float4*)p, rows, gib,
            huge ? "madvise" : "never");
      CK(cudaHostUnregister(p));
      munmap(p, bytes);
    }
    if (!only_managed) {
      // Driver-managed virtual memory on the host.
      CUmemAllocationProp prop = {};
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
      prop.location.id = 0;
      size_t gran = 0;
      CUresult r = cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
      CUmemGenericAllocationHandle h;
      size_t size = (bytes + gran - 1) / gran * gran;
      double t0 = now();
      if (r == CUDA_SUCCESS) r = cuMemCreate(&h, size, &prop, 0);
      CUdeviceptr va = 0;
      if (r == CUDA_SUCCESS) r = cuMemAddressReserve(&va, size, gran, 0, 0);
      if (r == CUDA_SUCCESS) r = cuMemMap(va, size, 0, h, 0);
      CUmemAccessDesc acc[2] = {};
      acc[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      acc[0].location.id = 0;
      acc[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      acc[1].location.type = CU_MEM_LOCATION_TYPE_HOST;
      acc[1].location.id = 0;
      acc[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      bool host_ok = false;
      if (r == CUDA_SUCCESS) {
        host_ok = cuMemSetAccess(va, size, acc, 2) == CUDA_SUCCESS;
        if (!host_ok) r = cuMemSetAccess(va, size, acc, 1);
      }
      const char* msg = "";
      if (r != CUDA_SUCCESS) cuGetErrorString(r, &msg);
      fprintf(stderr, "cuMemCreate host %.0f GiB, granularity %zu KiB: %s, host access %s\n", gib,
              gran >> 10, r == CUDA_SUCCESS ? "ok" : msg, host_ok ? "yes" : "no");
      if (r == CUDA_SUCCESS) {
        if (host_ok) {
          fill((float4*)va, rows);
        } else {
          std::vector<float4> chunk((size_t)1 << 20);
          for (size_t at = 0; at < rows * W4; at += chunk.size()) {
            size_t m = std::min(chunk.size(), rows * W4 - at);
            for (size_t i = 0; i < m; i++) chunk[i] = make_float4((at + i) / W4, (at + i) % W4, 0, 1);
            CK(cudaMemcpy((float4*)va + at, chunk.data(), m * sizeof(float4), cudaMemcpyHostToDevice));
          }
        }
        fprintf(stderr, "  filled in %.1f s\n", now() - t0);
        bench("cuMemCreate_host", (float4*)va, rows, gib, "driver", host_ok);
        cuMemUnmap(va, size);
        cuMemAddressFree(va, size);
        cuMemRelease(h);
      }
    }
    for (int advise_huge = 1; advise_huge >= 0; advise_huge--) {
      // Managed memory kept on the host, mapped for the GPU; with and without asking the
      // kernel for huge pages.
      double t0 = now();
      float4* m;
      CK(cudaMallocManaged((void**)&m, bytes));
      cudaMemLocation cpu, gpu;
      memset(&cpu, 0, sizeof cpu);
      memset(&gpu, 0, sizeof gpu);
      cpu.type = cudaMemLocationTypeHost;
      gpu.type = cudaMemLocationTypeDevice;
      gpu.id = 0;
      CK(cudaMemAdvise(m, bytes, cudaMemAdviseSetPreferredLocation, cpu));
      CK(cudaMemAdvise(m, bytes, cudaMemAdviseSetAccessedBy, gpu));
      if (advise_huge) madvise(m, bytes, MADV_HUGEPAGE);
      fill(m, rows);
      fprintf(stderr, "managed on host %.0f GiB: %.1f s\n", gib, now() - t0);
      bench("managed_preferred_host", m, rows, gib, advise_huge ? "madvise" : "none");
      CK(cudaFree(m));
    }
  }
  return 0;
}
