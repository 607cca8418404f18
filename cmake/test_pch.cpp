// The source of bamboo_test_pch, the target that builds the precompiled
// header of the tests and the benchmarks (CMakeLists.txt): nothing of its own.
