// signals_split.cu - which side of a mailbox exchange a gap between berth and CUDA C++ comes
// from: one C++ host loop (signals.cu's protocol and loops) drives, in turn, the C++
// echo_server (signals.cu's) and berth's square_worker loaded from the bundle's PTX
// (cuModuleLoad, launched like any driver-API kernel). With the host the same, a difference
// between the two lines is the kernels'; berth's own host (bench_signals) against this
// program's C++ kernel line is then the hosts'.
//
// Build and run on the GPU machine (the bundle carries it; run.sh does not run it):
//   nvcc -O3 -arch=sm_90 -std=c++20 -o signals_split signals_split.cu -lcuda
//   ./signals_split [--rounds N] [--jobs N] berth:berth=berth_examples.ptx [cpp:LABEL=PTX]...
// Output, one JSON line per kernel and measure, as signals.cu:
//   {"impl":"cpp_host","kernel":"cpp","bench":"round_trip","median_us":...}
//   {"impl":"cpp_host","kernel":"berth","bench":"mailbox_throughput","jobs_per_s":...}

#include <cuda.h>

#include "common.h"
#include "mailbox.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#define CU_CHECK(call)                                                                \
    do {                                                                              \
        CUresult r_ = (call);                                                         \
        if (r_ != CUDA_SUCCESS) {                                                     \
            const char* s_ = nullptr;                                                 \
            cuGetErrorString(r_, &s_);                                                \
            std::fprintf(stderr, "CUDA driver error %d at %s:%d: %s\n", (int)r_,      \
                         __FILE__, __LINE__, s_ ? s_ : "?");                          \
            std::exit(1);                                                             \
        }                                                                             \
    } while (0)

// Fresh rings (slot k waits for message k) in mapped pinned memory, as both benchmarks use.
struct Rings {
    Slot<Job>* h_in; Slot<Reply>* h_out; uint32_t* h_ctl;
    Slot<Job>* d_in; Slot<Reply>* d_out; uint32_t* d_ctl;
    Rings() {
        CUDA_CHECK(cudaHostAlloc((void**)&h_in, CAP * sizeof(Slot<Job>), cudaHostAllocMapped));
        CUDA_CHECK(cudaHostAlloc((void**)&h_out, CAP * sizeof(Slot<Reply>), cudaHostAllocMapped));
        CUDA_CHECK(cudaHostAlloc((void**)&h_ctl, 2 * sizeof(uint32_t), cudaHostAllocMapped));
        for (uint32_t k = 0; k < CAP; ++k) {
            h_in[k] = Slot<Job>{k, Job{0, 0, 0.0f}};
            h_out[k] = Slot<Reply>{k, Reply{0, 0.0f}};
        }
        h_ctl[0] = h_ctl[1] = 0xFFFFFFFFu;
        CUDA_CHECK(cudaHostGetDevicePointer((void**)&d_in, h_in, 0));
        CUDA_CHECK(cudaHostGetDevicePointer((void**)&d_out, h_out, 0));
        CUDA_CHECK(cudaHostGetDevicePointer((void**)&d_ctl, h_ctl, 0));
    }
    ~Rings() {
        cudaFreeHost(h_in);
        cudaFreeHost(h_out);
        cudaFreeHost(h_ctl);
    }
};

// One round against one kernel, already launched on the rings: warm-up, strict round trips,
// throughput with the ring kept full, stop. Prints two lines.
static int drive(Rings& r, const char* kernel, long rounds, long jobs, uint32_t* answered) {
    Host h{r.h_in, r.h_out};
    size_t bad = 0;
    for (int i = 0; i < kWarmup; ++i) {
        uint32_t n = h.sent;
        h.send(n, 0, job_value(n));
        if (!reply_ok(h.recv(), n)) ++bad;
    }
    std::vector<double> us(rounds);
    for (long i = 0; i < rounds; ++i) {
        uint32_t n = h.sent;
        auto t0 = Clock::now();
        h.send(n, 0, job_value(n));
        Reply rep = h.recv();
        auto t1 = Clock::now();
        us[i] = std::chrono::duration<double, std::micro>(t1 - t0).count();
        if (!reply_ok(rep, n)) ++bad;
    }
    std::sort(us.begin(), us.end());
    auto at = [&](size_t pct) { return us[(us.size() - 1) * pct / 100]; };
    std::printf("{\"impl\":\"cpp_host\",\"kernel\":\"%s\",\"bench\":\"round_trip\",\"rounds\":%ld,"
                "\"median_us\":%.3f,\"p99_us\":%.3f,\"bad\":%zu}\n", kernel, rounds, at(50), at(99), bad);
    size_t bad_tp = 0;
    double secs = keep_full(h, (uint32_t)jobs, bad_tp);
    uint32_t total = h.sent;
    h.send(total, 1, 0.0f);
    CUDA_CHECK(cudaDeviceSynchronize());
    if (*(volatile uint32_t*)answered != total) {
        std::fprintf(stderr, "%s kernel answered %u jobs, host sent %u\n", kernel,
                     *(volatile uint32_t*)answered, total);
        ++bad_tp;
    }
    std::printf("{\"impl\":\"cpp_host\",\"kernel\":\"%s\",\"bench\":\"mailbox_throughput\",\"jobs\":%ld,"
                "\"jobs_per_s\":%.1f,\"bad\":%zu}\n", kernel, jobs, (double)jobs / secs, bad_tp);
    std::fflush(stdout);
    return 0;
}

// One module's kernel to serve a round: berth's square_worker, or the C++ echo_server loaded
// from a module (the PTX of this file, `nvcc -ptx`, JIT-compiled by the driver as berth's is).
struct Server {
    const char* label;
    bool berth;       // square_worker's parameters, else echo_server's
    CUfunction fn;    // null: echo_server compiled into this program
};

static void serve(const Server& s, long rounds, long jobs) {
    Rings r;
    if (!s.fn) {
        echo_server<<<1, 1>>>(r.d_in, r.d_out, &r.d_ctl[1]);
        CUDA_CHECK(cudaGetLastError());
    } else if (s.berth) {
        // square_worker(patience_ms: u32, inbox: (ptr, len), outbox: (ptr, len),
        // ctl: (ptr, len)): the lowered parameters of berth's launcher.
        uint32_t patience_ms = 30000;
        uint64_t in_ptr = (uint64_t)r.d_in, in_len = CAP;
        uint64_t out_ptr = (uint64_t)r.d_out, out_len = CAP;
        uint64_t ctl_ptr = (uint64_t)r.d_ctl, ctl_len = 2;
        void* params[] = {&patience_ms, &in_ptr, &in_len, &out_ptr, &out_len, &ctl_ptr, &ctl_len};
        CU_CHECK(cuLaunchKernel(s.fn, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
    } else {
        uint32_t* served = &r.d_ctl[1];
        void* params[] = {&r.d_in, &r.d_out, &served};
        CU_CHECK(cuLaunchKernel(s.fn, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
    }
    // Make sure the launch is submitted now, not batched behind a later call.
    CUresult q = cuStreamQuery(nullptr);
    if (q != CUDA_SUCCESS && q != CUDA_ERROR_NOT_READY) CU_CHECK(q);
    drive(r, s.label, rounds, jobs, &r.h_ctl[1]);
}

int main(int argc, char** argv) {
    // Arguments: [--rounds N] [--jobs N] then servers, each `berth:LABEL=MODULE` (square_worker)
    // or `cpp:LABEL=MODULE` (its echo_variant, from echo_variants.cu, else its echo_server);
    // the built-in C++ server always runs, as `cpp`.
    long rounds = 20000, jobs = 200000;
    CUDA_CHECK(cudaFree(nullptr));  // the primary context, current for the driver calls too
    std::vector<Server> servers{{"cpp", false, nullptr}};
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--rounds" && i + 1 < argc) { rounds = std::strtol(argv[++i], nullptr, 10); continue; }
        if (a == "--jobs" && i + 1 < argc) { jobs = std::strtol(argv[++i], nullptr, 10); continue; }
        size_t colon = a.find(':'), eq = a.find('=');
        if (colon == std::string::npos || eq == std::string::npos || eq < colon) {
            std::fprintf(stderr, "usage: %s [--rounds N] [--jobs N] (berth|cpp):LABEL=MODULE...\n", argv[0]);
            return 2;
        }
        bool berth = a.substr(0, colon) == "berth";
        CUmodule m;
        CU_CHECK(cuModuleLoad(&m, a.substr(eq + 1).c_str()));
        CUfunction f;
        if (berth) {
            CU_CHECK(cuModuleGetFunction(&f, m, "square_worker"));
        } else if (cuModuleGetFunction(&f, m, "echo_variant") != CUDA_SUCCESS) {
            CU_CHECK(cuModuleGetFunction(&f, m, "echo_server"));
        }
        servers.push_back({strdup(a.substr(colon + 1, eq - colon - 1).c_str()), berth, f});
    }
    cudaDeviceProp prop = current_device_prop();
    std::fprintf(stderr, "device: %s, CAP=%u rounds=%ld jobs=%ld\n", prop.name, CAP, rounds, jobs);
    for (int round = 1; round <= 2; ++round)
        for (const Server& s : servers) serve(s, rounds, jobs);
    return 0;
}
