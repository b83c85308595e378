// A gRPC message allocator that puts a callback method's request and
// response on one protobuf arena per call, its first block inside the
// holder: building and freeing a response of a few dozen strings and
// sub-messages then costs one allocation and one free instead of one each.
#ifndef VTRAIN_SERVER_ARENA_ALLOCATOR_H_
#define VTRAIN_SERVER_ARENA_ALLOCATOR_H_

#include <cstddef>

#include "google/protobuf/arena.h"
#include "grpcpp/support/message_allocator.h"

namespace vtrain::server {

template <typename Request, typename Response>
class ArenaAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  // Bytes of the first arena block, held in the holder itself (a Predict
  // response is a few kB).
  static constexpr size_t kInitialBlockBytes = 16 * 1024;

  grpc::MessageHolder<Request, Response>* AllocateMessages() override { return new Holder(); }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() : arena_(Options(block_)) {
      this->set_request(google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    void Release() override { delete this; }

   private:
    static google::protobuf::ArenaOptions Options(char* block) {
      google::protobuf::ArenaOptions options;
      options.initial_block = block;
      options.initial_block_size = kInitialBlockBytes;
      return options;
    }
    alignas(16) char block_[kInitialBlockBytes];
    google::protobuf::Arena arena_;  // after block_: built from it, destroyed before it
  };
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_ARENA_ALLOCATOR_H_
