// echo_variants.cu - the C++ echo_server (mailbox.h's) with berth's square_worker's code-level
// differences switched on one at a time, to find which of them costs berth's kernel its
// mailbox gap. Built to PTX and run under signals_split.cu's C++ host as `cpp:` modules:
//   nvcc -ptx -O3 -arch=sm_90 -std=c++20 [-D...] -o v.ptx echo_variants.cu
//   ./signals_split cpp:LABEL=v.ptx ...   (runs the module's echo_variant)
// Switches (none: mailbox.h's server, with its atomics written as the PTX they compile to):
//   GLOBAL_POLL  poll with ld.acquire.sys.global (berth's LDG) instead of generic ld (LD)
//   GLOBAL_REL   release with st.release.sys.global instead of generic st
//   TIMER        berth's bounded wait: %globaltimer read after a failed poll, then every 16
//   ORDER        read the item's value first, as berth's loads are issued
//   WAIT_LOADS   use the stop word before the fence (as ptxas schedules berth's stop check),
//                so that with ORDER every item read has returned when the fence issues
//   EXTRA_LOAD   one more, unused, read of the slot's seq after the item's
// The protocol and the slot layout are mailbox.h's.
#include "mailbox.h"

__device__ __forceinline__ uint32_t v_acquire(uint32_t* p) {
    uint32_t v;
#ifdef GLOBAL_POLL
    asm volatile("ld.acquire.sys.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
#else
    asm volatile("ld.acquire.sys.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
#endif
    return v;
}
__device__ __forceinline__ void v_release(uint32_t* p, uint32_t v) {
#ifdef GLOBAL_REL
    asm volatile("st.release.sys.global.b32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
#else
    asm volatile("st.release.sys.b32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
#endif
}
__device__ __forceinline__ uint64_t now() {
    uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}
// Wait for *p == want: berth's poll_until (timer read after the first miss, then every 16
// polls) or a bare spin.
__device__ __forceinline__ bool wait_for(uint32_t* p, uint32_t want, uint64_t patience) {
#ifdef TIMER
    if (v_acquire(p) == want) return true;
    uint64_t start = now();
    for (uint32_t polls = 0;;) {
        if (v_acquire(p) == want) return true;
        ++polls;
        if ((polls & 15) == 0 && now() - start > patience) return false;
    }
#else
    while (v_acquire(p) != want) {}
    return true;
#endif
}

extern "C" __global__ void echo_variant(Slot<Job>* inbox, Slot<Reply>* outbox, uint32_t* served) {
    uint64_t patience = 30000ull * 1000000ull;
    for (uint32_t n = 0;; ++n) {
        Slot<Reply>* out = &outbox[n % CAP];
        if (!wait_for(&out->seq, n, patience)) { *(volatile uint32_t*)served = 0xdead; return; }
        Slot<Job>* in = &inbox[n % CAP];
        if (!wait_for(&in->seq, n + 1, patience)) { *(volatile uint32_t*)served = 0xdead; return; }
        volatile Job* j = &in->item;
#ifdef ORDER
        float v = j->value;
        uint32_t id = j->id, stop = j->stop;
#else
        uint32_t id = j->id, stop = j->stop;
        float v = j->value;
#endif
#ifdef EXTRA_LOAD
        asm volatile("{ .reg .b32 t; ld.volatile.global.u32 t, [%0]; }" :: "l"(&in->seq) : "memory");
#endif
#ifdef WAIT_LOADS
        // Use a loaded value before the fence (as ptxas schedules berth's stop check), so the
        // loads complete before the MEMBAR starts.
        __shared__ uint32_t sink;
        asm volatile("st.volatile.shared.u32 [%0], %1;" :: "l"(&sink), "r"(stop) : "memory");
#endif
        v_release(&in->seq, n + CAP);
        if (stop) {
            *(volatile uint32_t*)served = n;
            return;
        }
        volatile Reply* r = &out->item;
        r->id = id;
        r->value = __fadd_rn(__fmul_rn(v, v), 1.0f);
        v_release(&out->seq, n + 1);
    }
}
