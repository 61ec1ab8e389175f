// stream_input.h - the benchmarks' streamed input, shared by pipeline.cu and multigpu.cu.
//
// Element i is a pure function of i (splitmix64 is counter-based), so every buffer gets the
// same x and a check can recompute x[i] without a copy. berth_tests::stream_input_at is the
// same function on the Rust side (its test holds two of these values).
#pragma once

#include <cstddef>
#include <cstdint>

static inline uint64_t splitmix_at(uint64_t i) {
    uint64_t z = 0x243F6A8885A308D3ull + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// 24 random bits -> exactly representable float in [-1, 1).
static inline float x_at(size_t i) {
    return (float)(splitmix_at(i) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}
