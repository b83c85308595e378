// Who a call comes from, for sharing the simulation slots fairly
// (server/admission.h): the client's own name in the `x-vtrain-client`
// metadata (at most 64 printable characters; a client running several
// programs names them alike), else its bearer token (as a short hash, never
// the token), else its address without the port (two programs on one host
// are one client).
#ifndef VTRAIN_SERVER_CLIENT_KEY_H_
#define VTRAIN_SERVER_CLIENT_KEY_H_

#include <string>

#include "grpcpp/server_context.h"

namespace vtrain::server {

std::string ClientKey(const grpc::ServerContextBase& context);

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_CLIENT_KEY_H_
