# SPDX-License-Identifier: Apache-2.0
# CMake < 3.27 does not know nvcc's C++20 flag, and its CUDA compiler check (a try_compile that
# inherits CMAKE_CUDA_STANDARD 20) then fails. The root CMakeLists.txt installs it as
# CMAKE_USER_MAKE_RULES_OVERRIDE_CUDA before enable_language(CUDA); harmless on newer CMake.
set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
