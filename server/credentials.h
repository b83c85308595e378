// The secrets vtrain-server reads from files its flags name: TLS listening
// credentials (mutual TLS with a client CA), a predictor's channel
// credentials to its registry, and the push token.
#ifndef VTRAIN_SERVER_CREDENTIALS_H_
#define VTRAIN_SERVER_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace vtrain::server {

struct ServerTlsFiles {
  std::string cert_file;  // --tls-cert-file: PEM certificate chain
  std::string key_file;   // --tls-key-file: PEM private key
  std::string
      client_ca_file;  // --tls-client-ca-file: set, clients need certificates
};

// Insecure credentials when neither the certificate nor the key is named;
// otherwise TLS (mutual TLS with a client CA). INVALID_ARGUMENT naming the
// flag and the file when one of the two is missing or a file is unreadable.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> LoadServerCredentials(
    const ServerTlsFiles& files);

// A predictor's credentials to its registry: insecure when `ca_file`
// (--registry-ca-file) is empty, else TLS trusting that CA. INVALID_ARGUMENT
// naming the flag and the file when it is unreadable.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
LoadRegistryChannelCredentials(const std::string& ca_file);

// The bearer token in the file --push-token-file names, surrounding
// whitespace removed. INVALID_ARGUMENT naming the flag and the file when it
// is unreadable or holds only whitespace.
absl::StatusOr<std::string> ReadPushToken(const std::string& path);

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_CREDENTIALS_H_
