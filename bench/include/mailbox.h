// mailbox.h - the mailbox protocol of the C++ signal benchmarks (signals.cu, the reference;
// signals_split.cu, the diagnostic that runs berth's kernel under this host): the slot layout,
// the persistent echo server, the host's send and receive, and the jobs and their check.
//
// Protocol (identical on the Rust side): each mailbox is a ring of CAP slots
// {u32 seq; item}; slot k starts with seq = k. Message n lives in slot n % CAP.
// The producer of n waits for seq == n (acquire), writes the item, stores
// seq = n + 1 (release); the consumer of n waits for seq == n + 1 (acquire),
// reads the item, stores seq = n + CAP (release). Each side counts its own n
// from 0. Both sides spin without sleeping. The server holds the reply slot of
// message n (waits for it to be free) before waiting for request n.
#pragma once

#include <cuda_runtime.h>
#include <cuda/atomic>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

constexpr uint32_t CAP = 256;
constexpr int kWarmup = 1000;

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
extern "C" __global__ void echo_server(Slot<Job>* inbox, Slot<Reply>* outbox, uint32_t* served) {
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

// Job n carries id n and value (n % 1000) * 0.25, as on the Rust side:
// v*v + 1 = (k*k + 16) / 16 with k*k + 16 < 2^24 is then exact in float, so
// fused or unfused, a correct reply is bit-for-bit and compared exactly.
static float job_value(uint32_t n) { return (float)(n % 1000) * 0.25f; }
static bool reply_ok(const Reply& r, uint32_t n) {
    float v = job_value(n);
    return r.id == n && r.value == v * v + 1.0f;
}

// Throughput with the ring kept full, the same loop as the Rust side: before each send, while
// CAP-1 jobs are in flight, wait for the oldest reply; after the last send, take the remaining
// replies in order. Wrong replies are added to `bad`; the seconds it took.
static double keep_full(Host& h, uint32_t jobs, size_t& bad) {
    uint32_t end = h.sent + jobs;
    auto t0 = Clock::now();
    auto take = [&] { uint32_t n = h.received; if (!reply_ok(h.recv(), n)) ++bad; };
    while (h.sent != end) {
        while (h.sent - h.received >= CAP - 1) take();
        h.send(h.sent, 0, job_value(h.sent));
    }
    while (h.received != end) take();
    return std::chrono::duration<double>(Clock::now() - t0).count();
}
