// The source of bamboo_pch, the target that builds the precompiled header of
// the control plane, the programs, the tests and the benchmarks
// (CMakeLists.txt): nothing of its own.
