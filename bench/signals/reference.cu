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
// The protocol, the server and the host's calls are in mailbox.h.

#include "common.h"
#include "mailbox.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

// Bare flag round trips, no mailbox (the protocol of H200-REFERENCE.md's 2.8 us):
// the host raises cells[0] to n (release); this thread, spinning on it
// (acquire), answers by storing n in cells[1] (release). Launched <<<1,1>>>.
__global__ void ping_pong(uint32_t* cells, uint32_t rounds);

__global__ void ping_pong(uint32_t* cells, uint32_t rounds) {
    for (uint32_t n = 1; n <= rounds; ++n) {
        while (d_acquire(&cells[0]) != n) {
        }
        d_release(&cells[1], n);
    }
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

    // 2. Throughput with the ring kept full (keep_full, mailbox.h).
    double secs = keep_full(h, (uint32_t)jobs, bad_tp);

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
