// multigpu.cu - CUDA C++ and NCCL references for berth's multi-GPU benchmark
// (bench/multigpu/main.rs), run in the same job on the same machine.
//
// - peer_read: the block_sum kernel of reference.cu on device 0 over 1 GiB of f32 that lives
//   on device 1, read in place after cudaDeviceEnablePeerAccess ("where":"peer"), and over
//   device 0's own copy ("where":"local"); wall clock around launch + synchronise, one warm-up,
//   median of reps, as the berth side does.
// - peer_step (1 MiB): a step across devices, saxpy writing y on device 1, an event recorded
//   after it and device 0's stream made to wait for it, then block_sum on device 0 reading y in
//   place, device 0's stream synchronised; per-step wall clock over 200 steps, median of reps.
// - allreduce: ncclAllReduce (float, sum, in place) of 1 MiB, 64 MiB and 1 GiB on every
//   device, one process and one thread (ncclCommInitAll, one group per collective), the
//   streams synchronised after each; bus bandwidth bytes * 2(n-1)/n / time; "submit_us" is
//   the host time of the group that queues it (the rest is the synchronise).
//   "allreduce_devsync": the same, each device waited for with cudaDeviceSynchronize.
//   "allreduce_step" (1 MiB): the all-reduce, then saxpy reading its result on another stream
//   of each device, ordered by an event, the saxpy streams synchronised.
//
// - multigpu_pipeline: the elementwise pipeline of berth's benchmark written by hand: 4 GiB of
//   x in pinned host memory through y = 1.5 x + 1 into 4 GiB of y, split in equal shards over
//   1 or 2 devices, each device 3 streams x 64 MiB chunks (copy in, kernel, copy out), all
//   queued from one thread and synchronised at the end; wall clock, one warm-up, median.
//   "host":"main" allocates every shard from the main thread; "host":"local" allocates each
//   device's shard from a thread bound to the CPUs of the device's NUMA node (sysfs), so the
//   pages sit next to the device's link, as berth does.
//   "multigpu_copy_ceiling": the same passes over the same shards with the kernel left out,
//   the copies in and out alone: the ceiling of any in/out pipeline on that many devices,
//   whose scaling bounds the pipeline's.
//
// Build (on the GPU machine): nvcc -O3 -arch=sm_90 -o multigpu multigpu.cu -lnccl
// Run:                        ./multigpu [peer|allreduce|pipeline|all] [reps=5]
// Output: JSON lines with "impl":"cuda" on stdout; diagnostics on stderr.

#include <cuda_runtime.h>

#include "common.h"
#include "stream_input.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <thread>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#if __has_include(<nccl.h>)
#include <nccl.h>
#else
// The few NCCL declarations used here (NCCL 2.x ABI), for machines with the library only.
extern "C" {
typedef struct ncclComm* ncclComm_t;
typedef enum { ncclSuccess = 0 } ncclResult_t;
typedef enum { ncclFloat32 = 7 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();
const char* ncclGetErrorString(ncclResult_t result);
}
#endif

#define NCCL_CHECK(call)                                                            \
    do {                                                                            \
        ncclResult_t r_ = (call);                                                   \
        if (r_ != ncclSuccess) {                                                    \
            std::fprintf(stderr, "NCCL error %d at %s:%d: %s\n", (int)r_, __FILE__,  \
                         __LINE__, ncclGetErrorString(r_));                         \
            std::exit(1);                                                           \
        }                                                                           \
    } while (0)

constexpr int kBlock = 256;

// As in reference.cu (and berth's block_sum): grid-stride accumulation, then a tree in shared
// memory; blockDim.x == kBlock.
__global__ void block_sum(const float* x, float* partial, size_t n) {
    __shared__ float tile[kBlock];
    float acc = 0.0f;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        acc += x[i];
    tile[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) tile[threadIdx.x] += tile[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = tile[0];
}

// berth_examples::saxpy: y[i] = a * x[i] + y[i].
__global__ void saxpy(float a, const float* x, size_t n, float* y) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void fill(float* x, size_t n, float v) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

static int count_not(const float* x, size_t len, size_t stride, float want);

// A step across devices (peer access enabled by the caller): y += z on device 1, then the
// sum of y on device 0 read in place, ordered by an event; device 0's stream synchronised.
static void peer_step(int reps) {
    const size_t n = (size_t)1 << 18;
    const int iters = 200, blocks = 132 * 8;
    float *z, *y, *partial;
    cudaStream_t s0, s1;
    cudaEvent_t written;
    CUDA_CHECK(cudaSetDevice(1));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
    CUDA_CHECK(cudaMalloc(&z, n * 4));
    CUDA_CHECK(cudaMalloc(&y, n * 4));
    fill<<<(n + 255) / 256, 256, 0, s1>>>(z, n, 1.0f);
    fill<<<(n + 255) / 256, 256, 0, s1>>>(y, n, 0.0f);
    CUDA_CHECK(cudaStreamSynchronize(s1));
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMalloc(&partial, blocks * 4));
    std::vector<double> t;
    for (int r = 0; r <= reps; r++) {
        double start = now_s();
        for (int i = 0; i < iters; i++) {
            CUDA_CHECK(cudaSetDevice(1));
            saxpy<<<(n + 255) / 256, 256, 0, s1>>>(1.0f, z, n, y);
            CUDA_CHECK(cudaEventRecord(written, s1));
            CUDA_CHECK(cudaSetDevice(0));
            CUDA_CHECK(cudaStreamWaitEvent(s0, written, 0));
            block_sum<<<blocks, kBlock, 0, s0>>>(y, partial, n);
            CUDA_CHECK(cudaGetLastError());
            CUDA_CHECK(cudaStreamSynchronize(s0));
        }
        if (r > 0) t.push_back((now_s() - start) / iters);
    }
    // Every step added one: y holds the number of steps, and the last sum saw all of it.
    const float steps = (float)((reps + 1) * iters);
    int bad = count_not(y, n, 1, steps);
    std::vector<float> p(blocks);
    CUDA_CHECK(cudaMemcpy(p.data(), partial, blocks * 4, cudaMemcpyDeviceToHost));
    double total = 0, want = (double)steps * n;
    for (float v : p) total += v;
    bad += std::fabs(total - want) > 1e-5 * want;
    std::printf("{\"impl\":\"cuda\",\"bench\":\"peer_step\",\"bytes\":%zu,\"iters\":%d,"
                "\"median_us\":%.2f,\"reps\":%d,\"bad\":%d}\n",
                n * 4, iters, upper_median(t) * 1e6, reps, bad);
    std::fflush(stdout);
    CUDA_CHECK(cudaFree(partial));
    CUDA_CHECK(cudaStreamDestroy(s0));
    CUDA_CHECK(cudaSetDevice(1));
    CUDA_CHECK(cudaFree(z));
    CUDA_CHECK(cudaFree(y));
    CUDA_CHECK(cudaEventDestroy(written));
    CUDA_CHECK(cudaStreamDestroy(s1));
}

static void peer(int reps) {
    const size_t n = (size_t)1 << 28;
    const int blocks = 132 * 8;
    int can = 0;
    CUDA_CHECK(cudaDeviceCanAccessPeer(&can, 0, 1));
    std::fprintf(stderr, "peer read: device 0 can access device 1: %d\n", can);
    if (!can) return;
    float *remote, *local, *partial;
    CUDA_CHECK(cudaSetDevice(1));
    CUDA_CHECK(cudaMalloc(&remote, n * 4));
    fill<<<(n + 255) / 256, 256>>>(remote, n, 1.0f);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaSetDevice(0));
    cudaError_t e = cudaDeviceEnablePeerAccess(1, 0);
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) CUDA_CHECK(e);
    (void)cudaGetLastError();
    CUDA_CHECK(cudaMalloc(&local, n * 4));
    CUDA_CHECK(cudaMalloc(&partial, blocks * 4));
    fill<<<(n + 255) / 256, 256>>>(local, n, 1.0f);
    CUDA_CHECK(cudaDeviceSynchronize());
    const char* places[] = {"peer", "local", "peer", "local"};
    for (const char* place : places) {
        const float* x = std::strcmp(place, "peer") == 0 ? remote : local;
        std::vector<double> t;
        for (int r = 0; r <= reps; r++) {
            double start = now_s();
            block_sum<<<blocks, kBlock>>>(x, partial, n);
            CUDA_CHECK(cudaGetLastError());
            CUDA_CHECK(cudaDeviceSynchronize());
            if (r > 0) t.push_back((now_s() - start) * 1e3);
        }
        std::vector<float> p(blocks);
        CUDA_CHECK(cudaMemcpy(p.data(), partial, blocks * 4, cudaMemcpyDeviceToHost));
        double total = 0;
        for (float v : p) total += v;
        double ms = upper_median(t);
        std::printf("{\"impl\":\"cuda\",\"bench\":\"peer_read\",\"where\":\"%s\",\"bytes\":%zu,"
                    "\"median_ms\":%.3f,\"gbps\":%.2f,\"reps\":%d,\"bad\":%d}\n",
                    place, n * 4, ms, n * 4 / (ms * 1e-3) / 1e9, reps, total != (double)n);
        std::fflush(stdout);
    }
    CUDA_CHECK(cudaFree(local));
    CUDA_CHECK(cudaFree(partial));
    CUDA_CHECK(cudaSetDevice(1));
    CUDA_CHECK(cudaFree(remote));
    peer_step(reps);
}

// How many of every `stride`-th element of `len` floats of the current device's `x` differ
// from `want`.
static int count_not(const float* x, size_t len, size_t stride, float want) {
    std::vector<float> h(len);
    CUDA_CHECK(cudaMemcpy(h.data(), x, len * 4, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (size_t i = 0; i < len; i += stride) bad += h[i] != want;
    return bad;
}

// The tail of a data-parallel step ("allreduce_step"): the all-reduce on each device's
// collective stream, then on every device saxpy reading the reduced buffer on a stream of its
// own, made to wait for the collective by an event (no host wait in between), then those
// streams synchronised. berth's side detaches the collective and launches on each device's
// default stream, which waits for the collective the same way.
static void step(int n, const std::vector<ncclComm_t>& comms,
                 const std::vector<cudaStream_t>& streams, const std::vector<float*>& bufs,
                 size_t len, int iters, int reps) {
    std::vector<cudaStream_t> work(n);
    std::vector<cudaEvent_t> reduced(n);
    std::vector<float*> outs(n);
    for (int d = 0; d < n; d++) {
        CUDA_CHECK(cudaSetDevice(d));
        CUDA_CHECK(cudaStreamCreateWithFlags(&work[d], cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreateWithFlags(&reduced[d], cudaEventDisableTiming));
        CUDA_CHECK(cudaMalloc(&outs[d], len * 4));
        fill<<<(len + 255) / 256, 256, 0, streams[d]>>>(bufs[d], len, (float)(d + 1));
        fill<<<(len + 255) / 256, 256, 0, streams[d]>>>(outs[d], len, 0.0f);
        CUDA_CHECK(cudaStreamSynchronize(streams[d]));
    }
    auto once = [&]() {
        NCCL_CHECK(ncclGroupStart());
        for (int d = 0; d < n; d++)
            NCCL_CHECK(ncclAllReduce(bufs[d], bufs[d], len, ncclFloat32, ncclSum, comms[d],
                                     streams[d]));
        NCCL_CHECK(ncclGroupEnd());
        for (int d = 0; d < n; d++) {
            CUDA_CHECK(cudaSetDevice(d));
            CUDA_CHECK(cudaEventRecord(reduced[d], streams[d]));
            CUDA_CHECK(cudaStreamWaitEvent(work[d], reduced[d], 0));
            saxpy<<<(len + 255) / 256, 256, 0, work[d]>>>(1.0f, bufs[d], len, outs[d]);
            CUDA_CHECK(cudaGetLastError());
        }
        for (int d = 0; d < n; d++) {
            CUDA_CHECK(cudaSetDevice(d));
            CUDA_CHECK(cudaStreamSynchronize(work[d]));
        }
    };
    // Correctness first: buffers of 1, 2, ... reduce to n(n+1)/2, which lands in zeroed outputs.
    once();
    int bad = 0;
    float want = (float)(n * (n + 1) / 2);
    for (int d = 0; d < n; d++) {
        CUDA_CHECK(cudaSetDevice(d));
        bad += count_not(outs[d], len, 1, want);
        fill<<<(len + 255) / 256, 256, 0, streams[d]>>>(bufs[d], len, 0.0f);
        fill<<<(len + 255) / 256, 256, 0, streams[d]>>>(outs[d], len, 0.0f);
        CUDA_CHECK(cudaStreamSynchronize(streams[d]));
    }
    std::vector<double> per;
    for (int r = 0; r <= reps; r++) {
        double start = now_s();
        for (int i = 0; i < iters; i++) once();
        if (r > 0) per.push_back((now_s() - start) / iters);
    }
    std::printf("{\"impl\":\"cuda\",\"bench\":\"allreduce_step\",\"devices\":%d,\"bytes\":%zu,"
                "\"iters\":%d,\"median_us\":%.2f,\"reps\":%d,\"bad\":%d}\n",
                n, len * 4, iters, upper_median(per) * 1e6, reps, bad);
    std::fflush(stdout);
    for (int d = 0; d < n; d++) {
        CUDA_CHECK(cudaSetDevice(d));
        CUDA_CHECK(cudaFree(outs[d]));
        CUDA_CHECK(cudaEventDestroy(reduced[d]));
        CUDA_CHECK(cudaStreamDestroy(work[d]));
    }
}

static void allreduce(int reps) {
    int n = 0;
    CUDA_CHECK(cudaGetDeviceCount(&n));
    std::vector<int> devs(n);
    for (int d = 0; d < n; d++) devs[d] = d;
    std::vector<ncclComm_t> comms(n);
    NCCL_CHECK(ncclCommInitAll(comms.data(), n, devs.data()));
    std::vector<cudaStream_t> streams(n);
    for (int d = 0; d < n; d++) {
        CUDA_CHECK(cudaSetDevice(d));
        CUDA_CHECK(cudaStreamCreateWithFlags(&streams[d], cudaStreamNonBlocking));
    }
    const size_t sizes[] = {(size_t)1 << 20, (size_t)64 << 20, (size_t)1 << 30};
    const int iters_of[] = {200, 40, 8};
    for (int k = 0; k < 3; k++) {
        size_t bytes = sizes[k], len = bytes / 4;
        int iters = iters_of[k];
        std::vector<float*> bufs(n);
        for (int d = 0; d < n; d++) {
            CUDA_CHECK(cudaSetDevice(d));
            CUDA_CHECK(cudaMalloc(&bufs[d], bytes));
            fill<<<(len + 255) / 256, 256, 0, streams[d]>>>(bufs[d], len, (float)(d + 1));
        }
        double queued = 0.0;  // host time of the queueing part, as berth's "submit_us"
        bool devsync = false;  // wait with cudaDeviceSynchronize instead of the streams'
        auto once = [&]() {
            double t = now_s();
            NCCL_CHECK(ncclGroupStart());
            for (int d = 0; d < n; d++)
                NCCL_CHECK(ncclAllReduce(bufs[d], bufs[d], len, ncclFloat32, ncclSum, comms[d],
                                         streams[d]));
            NCCL_CHECK(ncclGroupEnd());
            queued += now_s() - t;
            for (int d = 0; d < n; d++) {
                CUDA_CHECK(cudaSetDevice(d));
                if (devsync)
                    CUDA_CHECK(cudaDeviceSynchronize());
                else
                    CUDA_CHECK(cudaStreamSynchronize(streams[d]));
            }
        };
        once();
        int bad = 0;
        float want = (float)(n * (n + 1) / 2);
        for (int d = 0; d < n; d++) {
            CUDA_CHECK(cudaSetDevice(d));
            bad += count_not(bufs[d], len, 997, want);
            CUDA_CHECK(cudaMemsetAsync(bufs[d], 0, bytes, streams[d]));
            CUDA_CHECK(cudaStreamSynchronize(streams[d]));
        }
        if (k == 0) step(n, comms, streams, bufs, len, iters, reps);
        for (int v = 0; v < 2; v++) {
            devsync = v == 1;
            std::vector<double> per, submit;
            for (int r = 0; r <= reps; r++) {
                queued = 0.0;
                double start = now_s();
                for (int i = 0; i < iters; i++) once();
                if (r > 0) {
                    per.push_back((now_s() - start) / iters);
                    submit.push_back(queued / iters);
                }
            }
            double s = upper_median(per), sub = upper_median(submit);
            double busbw = bytes * 2.0 * (n - 1) / n / s / 1e9;
            std::printf("{\"impl\":\"cuda\",\"bench\":\"%s\",\"devices\":%d,\"bytes\":%zu,"
                        "\"iters\":%d,\"median_us\":%.2f,\"submit_us\":%.2f,\"busbw_gbps\":%.2f,"
                        "\"reps\":%d,\"bad\":%d}\n",
                        devsync ? "allreduce_devsync" : "allreduce", n, bytes, iters, s * 1e6,
                        sub * 1e6, busbw, reps, bad);
            std::fflush(stdout);
        }
        for (int d = 0; d < n; d++) {
            CUDA_CHECK(cudaSetDevice(d));
            CUDA_CHECK(cudaFree(bufs[d]));
        }
    }
    for (int d = 0; d < n; d++) NCCL_CHECK(ncclCommDestroy(comms[d]));
}

// ---------------------------------------------------------------- pipeline

constexpr float kA = 1.5f;
constexpr size_t kPipeN = (size_t)1 << 30;       // 4 GiB of f32 in, 4 GiB out
constexpr size_t kChunk = (size_t)16 << 20;      // 64 MiB of f32 per chunk
constexpr int kStreams = 3;

__global__ void affine(const float* x, float* y, size_t n, float a) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + 1.0f;
}


// The NUMA node of device d, from sysfs; -1 where the system does not say.
static int numa_node_of(int d) {
    char bus[64];
    CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, d));
    for (char* c = bus; *c; ++c) *c = (char)std::tolower((unsigned char)*c);
    char path[160];
    std::snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/numa_node", bus);
    int node = -1;
    if (FILE* f = std::fopen(path, "r")) {
        if (std::fscanf(f, "%d", &node) != 1) node = -1;
        std::fclose(f);
    }
    return node;
}

// Bind the calling thread to the CPUs of NUMA node `node` (nothing where it is unknown), so
// that memory it allocates and touches comes from that node.
static void bind_to_node(int node) {
    if (node < 0) return;
    char path[96];
    std::snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
    FILE* f = std::fopen(path, "r");
    if (!f) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    int a = 0;
    while (std::fscanf(f, "%d", &a) == 1) {
        int b = a, c = std::fgetc(f);
        if (c == '-') {
            if (std::fscanf(f, "%d", &b) != 1) break;
            c = std::fgetc(f);
        }
        for (int i = a; i <= b && i < CPU_SETSIZE; ++i) CPU_SET(i, &set);
        if (c != ',') break;
    }
    std::fclose(f);
    if (sched_setaffinity(0, sizeof set, &set) != 0) std::perror("sched_setaffinity");
}

struct Shard {
    int dev;
    size_t lo, len;
    float* x = nullptr;  // pinned host, len elements
    float* y = nullptr;
    float* dx[kStreams] = {};
    float* dy[kStreams] = {};
    cudaStream_t s[kStreams] = {};
};

// Shards of kPipeN over devices 0..n-1, host memory from the main thread or from a thread on
// each device's NUMA node, x filled (in parallel, after pinning: the pages stay where the
// allocation put them).
static std::vector<Shard> make_shards(int n, bool local) {
    std::vector<Shard> sh(n);
    size_t per = kPipeN / n;
    for (int d = 0; d < n; d++) {
        Shard& h = sh[d];
        h.dev = d;
        h.lo = per * d;
        h.len = d + 1 == n ? kPipeN - h.lo : per;
        auto alloc = [&h]() {
            CUDA_CHECK(cudaSetDevice(h.dev));
            CUDA_CHECK(cudaHostAlloc(&h.x, h.len * 4, cudaHostAllocPortable));
            CUDA_CHECK(cudaHostAlloc(&h.y, h.len * 4, cudaHostAllocPortable));
        };
        if (local) {
            int node = numa_node_of(d);
            std::fprintf(stderr, "pipeline: device %d is on NUMA node %d\n", d, node);
            std::thread t([&]() {
                bind_to_node(node);
                alloc();
            });
            t.join();
        } else {
            alloc();
        }
        CUDA_CHECK(cudaSetDevice(d));
        for (int k = 0; k < kStreams; k++) {
            CUDA_CHECK(cudaStreamCreateWithFlags(&h.s[k], cudaStreamNonBlocking));
            CUDA_CHECK(cudaMalloc(&h.dx[k], kChunk * 4));
            CUDA_CHECK(cudaMalloc(&h.dy[k], kChunk * 4));
        }
    }
    unsigned workers = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    std::vector<std::thread> fill;
    for (unsigned w = 0; w < workers; w++) {
        fill.emplace_back([&sh, w, workers]() {
            for (Shard& h : sh) {
                size_t step = (h.len + workers - 1) / workers;
                size_t a = std::min(h.len, step * w), b = std::min(h.len, a + step);
                for (size_t i = a; i < b; i++) h.x[i] = x_at(h.lo + i);
            }
        });
    }
    for (auto& t : fill) t.join();
    return sh;
}

static void free_shards(std::vector<Shard>& sh) {
    for (Shard& h : sh) {
        CUDA_CHECK(cudaSetDevice(h.dev));
        for (int k = 0; k < kStreams; k++) {
            CUDA_CHECK(cudaStreamDestroy(h.s[k]));
            CUDA_CHECK(cudaFree(h.dx[k]));
            CUDA_CHECK(cudaFree(h.dy[k]));
        }
        CUDA_CHECK(cudaFreeHost(h.x));
        CUDA_CHECK(cudaFreeHost(h.y));
    }
}

// One pass: y poisoned, chunk c of every shard queued before chunk c + 1 of any (the devices
// start together), then every device synchronised. Without `kernel`, the copies alone (y gets
// whatever the device buffers hold).
static double pipeline_once(std::vector<Shard>& sh, bool kernel = true) {
    for (Shard& h : sh) std::memset(h.y, 0xff, h.len * 4);
    double start = now_s();
    size_t most = 0;
    for (Shard& h : sh) most = std::max(most, (h.len + kChunk - 1) / kChunk);
    for (size_t c = 0; c < most; c++) {
        for (Shard& h : sh) {
            size_t off = c * kChunk;
            if (off >= h.len) continue;
            size_t m = std::min(kChunk, h.len - off);
            int k = (int)(c % kStreams);
            CUDA_CHECK(cudaSetDevice(h.dev));
            CUDA_CHECK(cudaMemcpyAsync(h.dx[k], h.x + off, m * 4, cudaMemcpyHostToDevice, h.s[k]));
            if (kernel) {
                affine<<<(unsigned)((m + 255) / 256), 256, 0, h.s[k]>>>(h.dx[k], h.dy[k], m, kA);
                CUDA_CHECK(cudaGetLastError());
            }
            CUDA_CHECK(cudaMemcpyAsync(h.y + off, h.dy[k], m * 4, cudaMemcpyDeviceToHost, h.s[k]));
        }
    }
    for (Shard& h : sh) {
        CUDA_CHECK(cudaSetDevice(h.dev));
        CUDA_CHECK(cudaDeviceSynchronize());
    }
    return now_s() - start;
}

// Sampled check, as the berth side does: every 4097th element and the last 1,000.
static int pipeline_bad(const std::vector<Shard>& sh) {
    int bad = 0;
    auto check = [&](size_t i) {
        for (const Shard& h : sh) {
            if (i >= h.lo && i < h.lo + h.len) {
                float want = kA * x_at(i) + 1.0f, got = h.y[i - h.lo];
                bad += !(std::fabs(got - want) <= 1e-5f * std::fabs(want) + 1e-6f);
            }
        }
    };
    for (size_t i = 0; i < kPipeN; i += 4097) check(i);
    for (size_t i = kPipeN - 1000; i < kPipeN; i++) check(i);
    return bad;
}

static void pipeline(int devices, int reps) {
    struct Config { int n; bool local; };
    std::vector<Config> configs = {{1, false}, {1, true}};
    if (devices >= 2) {
        configs.push_back({2, false});
        configs.push_back({2, true});
    }
    for (const Config& cfg : configs) {
        std::vector<Shard> sh = make_shards(cfg.n, cfg.local);
        pipeline_once(sh);
        std::vector<double> t;
        for (int r = 0; r < reps; r++) t.push_back(pipeline_once(sh));
        int bad = pipeline_bad(sh);
        double ms = upper_median(t) * 1e3;
        std::printf("{\"impl\":\"cuda\",\"bench\":\"multigpu_pipeline\",\"devices\":%d,\"host\":\"%s\","
                    "\"streams\":%d,\"chunk_bytes\":%zu,\"bytes_in\":%zu,\"median_ms\":%.3f,"
                    "\"gbps_in\":%.2f,\"reps\":%d,\"bad\":%d}\n",
                    cfg.n, cfg.local ? "local" : "main", kStreams, kChunk * 4, kPipeN * 4, ms,
                    kPipeN * 4 / (ms * 1e-3) / 1e9, reps, bad);
        std::fflush(stdout);
        pipeline_once(sh, false);
        t.clear();
        for (int r = 0; r < reps; r++) t.push_back(pipeline_once(sh, false));
        ms = upper_median(t) * 1e3;
        std::printf("{\"impl\":\"cuda\",\"bench\":\"multigpu_copy_ceiling\",\"devices\":%d,"
                    "\"host\":\"%s\",\"streams\":%d,\"chunk_bytes\":%zu,\"bytes_in\":%zu,"
                    "\"median_ms\":%.3f,\"gbps_in\":%.2f,\"reps\":%d}\n",
                    cfg.n, cfg.local ? "local" : "main", kStreams, kChunk * 4, kPipeN * 4, ms,
                    kPipeN * 4 / (ms * 1e-3) / 1e9, reps);
        std::fflush(stdout);
        free_shards(sh);
    }
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "all";
    int reps = argc > 2 ? std::atoi(argv[2]) : 5;
    if (reps < 1) reps = 1;
    int n = 0;
    CUDA_CHECK(cudaGetDeviceCount(&n));
    bool all = std::strcmp(mode, "all") == 0;
    if (all || std::strcmp(mode, "pipeline") == 0) pipeline(n, reps);
    // Asked for by name, the all-reduce also runs over one GPU (a communicator of one rank).
    if (n == 1 && std::strcmp(mode, "allreduce") == 0) allreduce(reps);
    if (n < 2) {
        std::fprintf(stderr, "multigpu: %d device(s): the other references need two\n", n);
        return 0;
    }
    if (all || std::strcmp(mode, "peer") == 0) peer(reps);
    if (all || std::strcmp(mode, "allreduce") == 0) allreduce(reps);
    return 0;
}
