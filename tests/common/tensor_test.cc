#include "common/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace oasr {
namespace {

TEST(ShapeTest, NumelStridesAndPrinting) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.stride(0), 12);
  EXPECT_EQ(s.stride(1), 4);
  EXPECT_EQ(s.stride(2), 1);
  EXPECT_EQ(s.ToString(), "[2, 3, 4]");
  EXPECT_EQ(Shape().numel(), 1);
  EXPECT_EQ(s, (Shape{2, 3, 4}));
  EXPECT_FALSE(s == (Shape{2, 12}));
}

TEST(ShapeDeathTest, RankAboveMaximumIsAnInvariantViolation) {
  Shape s{1, 1, 1, 1, 1, 1};
  EXPECT_DEATH(s.push_back(1), "kMaxRank");
}

TEST(TensorTest, ZerosAllocatesAlignedZeroedHostMemory) {
  absl::StatusOr<Tensor> t = Tensor::Zeros({3, 5}, DType::kFloat32);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->nbytes(), 60u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data()) % 64, 0u);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(t->data<float>()[i], 0.0f);
  EXPECT_EQ(t->device(), Device::Cpu());
}

TEST(TensorTest, ZeroSizedTensorIsNotEmpty) {
  absl::StatusOr<Tensor> t = Tensor::Empty({0, 4}, DType::kInt32);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->empty());
  EXPECT_EQ(t->numel(), 0);
}

TEST(TensorTest, NegativeDimensionIsRejectedByName) {
  absl::StatusOr<Tensor> t = Tensor::Empty({2, -1}, DType::kFloat32);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("dimension 1"), std::string::npos);
}

TEST(TensorTest, CudaAllocationWithoutAGpuIsUnavailable) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a GPU is present";
  absl::StatusOr<Tensor> t = Tensor::Empty({4}, DType::kFloat32, Device::Cuda(0));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnavailable);
}

TEST(TensorTest, MoveTransfersOwnership) {
  Tensor a = *Tensor::Zeros({4}, DType::kInt32);
  void* data = a.data();
  Tensor b = std::move(a);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(b.data(), data);
  Tensor c;
  c = std::move(b);
  EXPECT_EQ(c.data(), data);
}

TEST(TensorViewTest, SliceSelectReshapeShareMemory) {
  Tensor t = *Tensor::Empty({4, 2, 3}, DType::kFloat32);
  float* p = t.data<float>();
  for (int i = 0; i < 24; ++i) p[i] = static_cast<float>(i);

  TensorView rows = t.view().Slice(1, 2);
  EXPECT_EQ(rows.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(rows.data<float>()[0], 6.0f);

  TensorView one = t.view().Select(3);
  EXPECT_EQ(one.shape(), (Shape{2, 3}));
  EXPECT_EQ(one.data<float>()[5], 23.0f);

  TensorView flat = t.view().Reshape({24});
  EXPECT_EQ(flat.data(), t.data());
}

TEST(TensorViewDeathTest, OutOfRangeSliceIsAnInvariantViolation) {
  Tensor t = *Tensor::Empty({4}, DType::kFloat32);
  EXPECT_DEATH(t.view().Slice(3, 2), "Slice");
  EXPECT_DEATH(t.view().Reshape({5}), "Reshape");
}

TEST(TensorTest, CopyChecksDtypeAndCount) {
  Tensor a = *Tensor::Zeros({6}, DType::kFloat32);
  Tensor b = *Tensor::Empty({2, 3}, DType::kFloat32);
  for (int i = 0; i < 6; ++i) b.data<float>()[i] = 1.5f * i;
  ASSERT_TRUE(CopyTensor(a.view(), b.view()).ok());
  EXPECT_EQ(a.data<float>()[5], 7.5f);

  Tensor c = *Tensor::Empty({6}, DType::kInt32);
  EXPECT_EQ(CopyTensor(c.view(), a.view()).code(), absl::StatusCode::kInvalidArgument);
  ZeroTensor(a.view());
  EXPECT_EQ(a.data<float>()[5], 0.0f);
}

}  // namespace
}  // namespace oasr
