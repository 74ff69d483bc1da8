// NumPy .npy files of float32 (version 1.0, little-endian, C order): the
// interchange format for CTC log-probs and test fixtures, readable by
// numpy.load on the other side.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tensor.h"

namespace oasr::encoder {

// Reads a '<f4' C-order array into a new CPU tensor. Errors name the file
// and what is unsupported (dtype, Fortran order, rank above 6).
absl::StatusOr<Tensor> ReadNpyFloat32(const std::string& path);

// Writes `view` (float32, CPU) with its shape. Errors name the file.
absl::Status WriteNpyFloat32(const std::string& path, const TensorView& view);

}  // namespace oasr::encoder
