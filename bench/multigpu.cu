// multigpu.cu - CUDA C++ and NCCL references for berth's multi-GPU benchmark
// (tests/src/bin/bench_multigpu.rs), run in the same job on the same machine.
//
// - peer_read: the block_sum kernel of reference.cu on device 0 over 1 GiB of f32 that lives
//   on device 1, read in place after cudaDeviceEnablePeerAccess ("where":"peer"), and over
//   device 0's own copy ("where":"local"); wall clock around launch + synchronise, one warm-up,
//   median of reps, as the berth side does.
// - allreduce: ncclAllReduce (float, sum, in place) of 1 MiB, 64 MiB and 1 GiB on every
//   device, one process and one thread (ncclCommInitAll, one group per collective), the
//   streams synchronised after each; bus bandwidth bytes * 2(n-1)/n / time; "submit_us" is
//   the host time of the group that queues it (the rest is the synchronise).
//
// Build (on the GPU machine): nvcc -O3 -arch=sm_90 -o multigpu multigpu.cu -lnccl
// Run:                        ./multigpu [peer|allreduce|all] [reps=5]
// Output: JSON lines with "impl":"cuda" on stdout; diagnostics on stderr.

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
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

#define CUDA_CHECK(call)                                                            \
    do {                                                                            \
        cudaError_t err_ = (call);                                                  \
        if (err_ != cudaSuccess) {                                                  \
            std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(err_), \
                         __FILE__, __LINE__, cudaGetErrorString(err_));             \
            std::exit(1);                                                           \
        }                                                                           \
    } while (0)

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

__global__ void fill(float* x, size_t n, float v) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
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
        double ms = median(t);
        std::printf("{\"impl\":\"cuda\",\"bench\":\"peer_read\",\"where\":\"%s\",\"bytes\":%zu,"
                    "\"median_ms\":%.3f,\"gbps\":%.2f,\"reps\":%d,\"bad\":%d}\n",
                    place, n * 4, ms, n * 4 / (ms * 1e-3) / 1e9, reps, total != (double)n);
        std::fflush(stdout);
    }
    CUDA_CHECK(cudaFree(local));
    CUDA_CHECK(cudaFree(partial));
    CUDA_CHECK(cudaSetDevice(1));
    CUDA_CHECK(cudaFree(remote));
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
                CUDA_CHECK(cudaStreamSynchronize(streams[d]));
            }
        };
        once();
        int bad = 0;
        float want = (float)(n * (n + 1) / 2);
        for (int d = 0; d < n; d++) {
            std::vector<float> h(len);
            CUDA_CHECK(cudaSetDevice(d));
            CUDA_CHECK(cudaMemcpy(h.data(), bufs[d], bytes, cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < len; i += 997) bad += h[i] != want;
            CUDA_CHECK(cudaMemsetAsync(bufs[d], 0, bytes, streams[d]));
            CUDA_CHECK(cudaStreamSynchronize(streams[d]));
        }
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
        double s = median(per), sub = median(submit);
        double busbw = bytes * 2.0 * (n - 1) / n / s / 1e9;
        std::printf("{\"impl\":\"cuda\",\"bench\":\"allreduce\",\"devices\":%d,\"bytes\":%zu,"
                    "\"iters\":%d,\"median_us\":%.2f,\"submit_us\":%.2f,\"busbw_gbps\":%.2f,"
                    "\"reps\":%d,\"bad\":%d}\n",
                    n, bytes, iters, s * 1e6, sub * 1e6, busbw, reps, bad);
        std::fflush(stdout);
        for (int d = 0; d < n; d++) {
            CUDA_CHECK(cudaSetDevice(d));
            CUDA_CHECK(cudaFree(bufs[d]));
        }
    }
    for (int d = 0; d < n; d++) NCCL_CHECK(ncclCommDestroy(comms[d]));
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "all";
    int reps = argc > 2 ? std::atoi(argv[2]) : 5;
    if (reps < 1) reps = 1;
    int n = 0;
    CUDA_CHECK(cudaGetDeviceCount(&n));
    if (n < 2) {
        std::fprintf(stderr, "multigpu: %d device(s): the references need two\n", n);
        return 0;
    }
    bool all = std::strcmp(mode, "all") == 0;
    if (all || std::strcmp(mode, "peer") == 0) peer(reps);
    if (all || std::strcmp(mode, "allreduce") == 0) allreduce(reps);
    return 0;
}
