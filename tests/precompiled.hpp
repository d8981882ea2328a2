#pragma once
// The headers nearly every C++17 test file includes, precompiled once for all of them
// (CUINLINE_TEST_PCH): parsing them was a third of each test file's compile.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <cuinline/cuinline.hpp>
