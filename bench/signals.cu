// signals.cu - hand-written CUDA C++ baseline for the host<->kernel mailbox
// benchmark. A persistent one-thread kernel and the host exchange messages
// through two rings in mapped pinned host memory; the Rust benchmark runs the
// same protocol through berth in the same run, and the two are compared as
// ratios, so this measures berth's mailbox overhead, not the machine.
//
// Build (on the GPU machine):  nvcc -O3 -arch=sm_90 -std=c++20 -o signals signals.cu
// Run:                         ./signals [rounds=20000] [jobs=200000]
// (Without -std=c++20 the host atomics fall back to the GCC builtins that
// std::atomic_ref is built on; the generated x86 code is the same.)
//
// Output: one JSON line per measurement on stdout, e.g.
//   {"impl":"nvcc","bench":"round_trip","rounds":20000,"median_us":2.1,"p99_us":3.0,"bad":0}
//   {"impl":"nvcc","bench":"mailbox_throughput","jobs":200000,"jobs_per_s":1.5e6,"bad":0}
//   {"impl":"nvcc","bench":"flag_round_trip","rounds":20000,"median_us":2.8,"p99_us":3.0,"bad":0}
// Diagnostics go to stderr so stdout stays machine-readable.
//
// Protocol (identical on the Rust side): each mailbox is a ring of CAP slots
// {u32 seq; item}; slot k starts with seq = k. Message n lives in slot n % CAP.
// The producer of n waits for seq == n (acquire), writes the item, stores
// seq = n + 1 (release); the consumer of n waits for seq == n + 1 (acquire),
// reads the item, stores seq = n + CAP (release). Each side counts its own n
// from 0. Both sides spin without sleeping. The server holds the reply slot of
// message n (waits for it to be free) before waiting for request n.

#include <cuda_runtime.h>
#include <cuda/atomic>

#include "common.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

constexpr uint32_t CAP = 256;
constexpr int kWarmup = 1000;

// Bare flag round trips, no mailbox (the protocol of H200-REFERENCE.md's 2.8 us):
// the host raises cells[0] to n (release); this thread, spinning on it
// (acquire), answers by storing n in cells[1] (release). Launched <<<1,1>>>.
__global__ void ping_pong(uint32_t* cells, uint32_t rounds);

// Natural C layout, matching Rust's #[repr(C)] struct Slot<T> { seq: u32, item: T }.
struct Job { uint32_t id; uint32_t stop; float value; };
struct Reply { uint32_t id; float value; };
template <typename T> struct Slot { uint32_t seq; T item; };
static_assert(sizeof(Slot<Job>) == 16, "Slot<Job> must be 16 bytes");
static_assert(sizeof(Slot<Reply>) == 12, "Slot<Reply> must be 12 bytes");

// ---- device side -----------------------------------------------------------
// System scope because the other party is the CPU: these compile to
// ld.acquire.sys / st.release.sys, as the Rust side's atomics do.
__device__ __forceinline__ uint32_t d_acquire(uint32_t* p) {
    return cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*p).load(cuda::memory_order_acquire);
}
__device__ __forceinline__ void d_release(uint32_t* p, uint32_t v) {
    cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*p).store(v, cuda::memory_order_release);
}

// Persistent echo server, launched <<<1,1>>>. Items are moved with plain
// volatile accesses; the acquire/release on seq orders them.
__global__ void echo_server(Slot<Job>* inbox, Slot<Reply>* outbox, uint32_t* served) {
    for (uint32_t n = 0;; ++n) {
        // Hold the reply's slot before waiting for the job (as berth's worker does with
        // Mailbox::reserve): that round trip overlaps the host's turnaround.
        Slot<Reply>* out = &outbox[n % CAP];
        while (d_acquire(&out->seq) != n) {}
        Slot<Job>* in = &inbox[n % CAP];
        while (d_acquire(&in->seq) != n + 1) {}
        volatile Job* j = &in->item;
        uint32_t id = j->id, stop = j->stop;
        float v = j->value;
        d_release(&in->seq, n + CAP);
        if (stop) {
            *(volatile uint32_t*)served = n;  // visible to the host after the kernel ends
            return;
        }
        volatile Reply* r = &out->item;
        r->id = id;
        // Unfused on purpose: Rust does not contract into an FMA, so both sides
        // run the same instructions (the inputs make the result exact anyway).
        r->value = __fadd_rn(__fmul_rn(v, v), 1.0f);
        d_release(&out->seq, n + 1);
    }
}

// ---- host side -------------------------------------------------------------
// On x86 both compile to plain movs plus a compiler barrier. The loops spin
// without a pause instruction (the Rust side too, for its first 50 us of a wait).
#if __cplusplus >= 202002L
static inline uint32_t h_acquire(uint32_t* p) { return std::atomic_ref<uint32_t>(*p).load(std::memory_order_acquire); }
static inline void h_release(uint32_t* p, uint32_t v) { std::atomic_ref<uint32_t>(*p).store(v, std::memory_order_release); }
#else
static inline uint32_t h_acquire(uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void h_release(uint32_t* p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
#endif

using Clock = std::chrono::steady_clock;

// A faulted kernel never answers; rather than hang the whole bench run, give up
// after 10 s. The clock is read once per 2^20 spins, so the check costs a
// counter increment per spin.
static void watchdog(uint64_t& spins, Clock::time_point& since, const char* what) {
    if ((++spins & 0xFFFFF) != 0) return;
    if (spins == 0x100000) { since = Clock::now(); return; }
    if (Clock::now() - since > std::chrono::seconds(10)) {
        std::fprintf(stderr, "timed out waiting to %s (kernel dead?): %s\n", what,
                     cudaGetErrorString(cudaStreamQuery(0)));
        std::exit(1);
    }
}

struct Host {
    Slot<Job>* inbox;
    Slot<Reply>* outbox;
    uint32_t sent = 0, received = 0;  // this side's own message counters

    void send(uint32_t id, uint32_t stop, float value) {
        Slot<Job>* s = &inbox[sent % CAP];
        uint64_t spins = 0; Clock::time_point since;
        while (h_acquire(&s->seq) != sent) watchdog(spins, since, "send");
        volatile Job* j = &s->item;
        j->id = id; j->stop = stop; j->value = value;
        h_release(&s->seq, sent + 1);
        ++sent;
    }
    Reply recv() {
        Slot<Reply>* s = &outbox[received % CAP];
        uint64_t spins = 0; Clock::time_point since;
        while (h_acquire(&s->seq) != received + 1) watchdog(spins, since, "receive");
        volatile Reply* r = &s->item;
        Reply out{r->id, r->value};
        h_release(&s->seq, received + CAP);
        ++received;
        return out;
    }
};

__global__ void ping_pong(uint32_t* cells, uint32_t rounds) {
    for (uint32_t n = 1; n <= rounds; ++n) {
        while (d_acquire(&cells[0]) != n) {
        }
        d_release(&cells[1], n);
    }
}

// Job n carries id n and value (n % 1000) * 0.25, as on the Rust side:
// v*v + 1 = (k*k + 16) / 16 with k*k + 16 < 2^24 is then exact in float, so
// fused or unfused, a correct reply is bit-for-bit and compared exactly.
static float job_value(uint32_t n) { return (float)(n % 1000) * 0.25f; }
static bool reply_ok(const Reply& r, uint32_t n) {
    float v = job_value(n);
    return r.id == n && r.value == v * v + 1.0f;
}

int main(int argc, char** argv) {
    long rounds = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 20000;
    long jobs = argc > 2 ? std::strtol(argv[2], nullptr, 10) : 200000;
    if (argc > 3 || rounds < 1 || jobs < 1) {
        std::fprintf(stderr, "usage: %s [rounds=20000] [jobs=200000]\n", argv[0]);
        return 2;
    }

    cudaDeviceProp prop = current_device_prop();
    std::fprintf(stderr, "device: %s (%d SMs), CAP=%u rounds=%ld jobs=%ld\n",
                 prop.name, prop.multiProcessorCount, CAP, rounds, jobs);

    // Mapped pinned memory: with 64-bit UVA no cudaSetDeviceFlags(cudaDeviceMapHost)
    // is needed. Not write-combined: the host reads these slots, and uncached
    // WC reads would dominate the spin.
    Slot<Job>* h_in; Slot<Reply>* h_out; uint32_t* h_served;
    CUDA_CHECK(cudaHostAlloc((void**)&h_in, CAP * sizeof(Slot<Job>), cudaHostAllocMapped));
    CUDA_CHECK(cudaHostAlloc((void**)&h_out, CAP * sizeof(Slot<Reply>), cudaHostAllocMapped));
    CUDA_CHECK(cudaHostAlloc((void**)&h_served, sizeof(uint32_t), cudaHostAllocMapped));
    for (uint32_t k = 0; k < CAP; ++k) {
        h_in[k] = Slot<Job>{k, Job{0, 0, 0.0f}};
        h_out[k] = Slot<Reply>{k, Reply{0, 0.0f}};
    }
    *h_served = 0xFFFFFFFFu;  // poison: proves the kernel wrote its final count
    Slot<Job>* d_in; Slot<Reply>* d_out; uint32_t* d_served;
    CUDA_CHECK(cudaHostGetDevicePointer((void**)&d_in, h_in, 0));
    CUDA_CHECK(cudaHostGetDevicePointer((void**)&d_out, h_out, 0));
    CUDA_CHECK(cudaHostGetDevicePointer((void**)&d_served, h_served, 0));

    echo_server<<<1, 1>>>(d_in, d_out, d_served);
    CUDA_CHECK(cudaGetLastError());
    // Make sure the launch is submitted now, not batched behind a later call.
    cudaError_t q = cudaStreamQuery(0);
    if (q != cudaSuccess && q != cudaErrorNotReady) CUDA_CHECK(q);

    Host h{h_in, h_out};
    size_t bad_rt = 0, bad_tp = 0;

    // Warm-up: kernel start, page/TLB first touch, clocks. Wrong replies here
    // still count against round_trip.
    for (int i = 0; i < kWarmup; ++i) {
        uint32_t n = h.sent;
        h.send(n, 0, job_value(n));
        if (!reply_ok(h.recv(), n)) ++bad_rt;
    }

    // 1. Strict round trips, each timed on its own.
    std::vector<double> us(rounds);
    for (long i = 0; i < rounds; ++i) {
        uint32_t n = h.sent;
        float v = job_value(n);
        auto t0 = Clock::now();
        h.send(n, 0, v);
        Reply r = h.recv();
        auto t1 = Clock::now();
        us[i] = std::chrono::duration<double, std::micro>(t1 - t0).count();
        if (!reply_ok(r, n)) ++bad_rt;
    }
    std::sort(us.begin(), us.end());
    // Same quantile rule as the Rust side: sorted[floor((N - 1) * p)].
    auto at = [&](size_t pct) { return us[(us.size() - 1) * pct / 100]; };
    std::printf("{\"impl\":\"nvcc\",\"bench\":\"round_trip\",\"rounds\":%ld,\"median_us\":%.3f,"
                "\"p99_us\":%.3f,\"bad\":%zu}\n", rounds, at(50), at(99), bad_rt);
    std::fflush(stdout);

    // 2. Throughput with the ring kept full, the same loop as the Rust side:
    // before each send, while CAP-1 jobs are in flight, wait for the oldest
    // reply; after the last send, take the remaining replies in order.
    uint32_t first = h.sent, end = first + (uint32_t)jobs;
    auto t0 = Clock::now();
    auto take = [&] { uint32_t n = h.received; if (!reply_ok(h.recv(), n)) ++bad_tp; };
    while (h.sent != end) {
        while (h.sent - h.received >= CAP - 1) take();
        h.send(h.sent, 0, job_value(h.sent));
    }
    while (h.received != end) take();
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();

    // Stop the server; it records how many jobs it answered. A mismatch means
    // the protocol lost or invented messages; like the Rust side, it counts
    // against the throughput line.
    uint32_t total = h.sent;
    h.send(total, 1, 0.0f);
    CUDA_CHECK(cudaDeviceSynchronize());
    uint32_t served = *(volatile uint32_t*)h_served;
    if (served != total) {
        std::fprintf(stderr, "kernel served %u jobs, host sent %u\n", served, total);
        ++bad_tp;
    }
    std::printf("{\"impl\":\"nvcc\",\"bench\":\"mailbox_throughput\",\"jobs\":%ld,"
                "\"jobs_per_s\":%.1f,\"bad\":%zu}\n", jobs, (double)jobs / secs, bad_tp);
    std::fflush(stdout);

    // 3. Bare flag round trips (two adjacent u32 cells, as berth's Signals).
    uint32_t* h_cells; uint32_t* d_cells;
    CUDA_CHECK(cudaHostAlloc((void**)&h_cells, 2 * sizeof(uint32_t), cudaHostAllocMapped));
    h_cells[0] = h_cells[1] = 0;
    CUDA_CHECK(cudaHostGetDevicePointer((void**)&d_cells, h_cells, 0));
    uint32_t flag_total = (uint32_t)(kWarmup + rounds);
    ping_pong<<<1, 1>>>(d_cells, flag_total);
    CUDA_CHECK(cudaGetLastError());
    q = cudaStreamQuery(0);
    if (q != cudaSuccess && q != cudaErrorNotReady) CUDA_CHECK(q);
    us.clear();
    for (uint32_t n = 1; n <= flag_total; ++n) {
        auto f0 = Clock::now();
        h_release(&h_cells[0], n);
        while (h_acquire(&h_cells[1]) != n) {
        }
        auto f1 = Clock::now();
        if (n > (uint32_t)kWarmup) us.push_back(std::chrono::duration<double, std::micro>(f1 - f0).count());
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    size_t bad_flag = h_cells[1] != flag_total;
    std::sort(us.begin(), us.end());
    std::printf("{\"impl\":\"nvcc\",\"bench\":\"flag_round_trip\",\"rounds\":%ld,\"median_us\":%.3f,"
                "\"p99_us\":%.3f,\"bad\":%zu}\n", rounds, at(50), at(99), bad_flag);
    std::fflush(stdout);
    CUDA_CHECK(cudaFreeHost(h_cells));

    CUDA_CHECK(cudaFreeHost(h_in));
    CUDA_CHECK(cudaFreeHost(h_out));
    CUDA_CHECK(cudaFreeHost(h_served));
    return 0;
}
