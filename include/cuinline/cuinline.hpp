#pragma once
/// @file cuinline.hpp
/// Umbrella header.
#include <cuinline/arch.hpp>
#include <cuinline/cache.hpp>
#include <cuinline/compiler.hpp>
#include <cuinline/driver.hpp>
#include <cuinline/error.hpp>
#include <cuinline/jit.hpp>
#include <cuinline/kernel_cache.hpp>
#include <cuinline/load_inline.hpp>
#include <cuinline/log.hpp>
#include <cuinline/module.hpp>
#include <cuinline/remote_cache.hpp>
#include <cuinline/version.hpp>
