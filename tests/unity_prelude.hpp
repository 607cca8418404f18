// Included before each file of a unity batch of the tests: LibTorch's logging
// header defines a CHECK macro that would replace Catch's if a later file of the
// batch pulled it in after catch.hpp. Coming first, it is replaced by Catch's.
#pragma once

#include <ATen/ATen.h>

#include <catch2/catch.hpp>
