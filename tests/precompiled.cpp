// The program the tests' precompiled header (tests/precompiled.hpp) is built with; it runs no test.
