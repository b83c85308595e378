// Credential loading shared by vtrain-server, vtrainctl and vtrain-agent:
// PEM files and bearer tokens read from the files flags name, TLS server
// credentials (mutual TLS with a client CA) and TLS channel credentials.
// Incomplete TLS flag combinations are refused, never silently plaintext.
#ifndef VTRAIN_COMMON_CREDENTIALS_H_
#define VTRAIN_COMMON_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace vtrain::common {

// The bearer token in the file `path` that the flag `flag` named, surrounding
// whitespace removed. INVALID_ARGUMENT naming the flag and the file when it
// is unreadable or holds only whitespace.
absl::StatusOr<std::string> ReadTokenFile(const std::string& flag, const std::string& path);

struct ServerTlsFiles {
  std::string cert_file;       // --tls-cert-file: PEM certificate chain
  std::string key_file;        // --tls-key-file: PEM private key
  std::string client_ca_file;  // --tls-client-ca-file: set, clients need certificates
};

// Insecure credentials when no file is named; otherwise TLS (mutual TLS with
// a client CA). INVALID_ARGUMENT naming the flag and the file when one of
// certificate and key is missing, a client CA comes without them, or a file
// is unreadable.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> LoadServerCredentials(
    const ServerTlsFiles& files);

struct ChannelTlsFiles {
  std::string ca_file;    // trust this CA: TLS
  std::string cert_file;  // with key_file: present a client certificate (mutual TLS)
  std::string key_file;
  // The flags that named them, for errors ("--tls-ca-file", "--registry-ca-file").
  std::string ca_flag = "--tls-ca-file";
  std::string cert_flag = "--tls-cert-file";
  std::string key_flag = "--tls-key-file";
};

// Insecure credentials when no file is named; otherwise TLS trusting the CA,
// with a client certificate when both cert and key are named.
// INVALID_ARGUMENT naming the flag when the combination is incomplete (a
// certificate or key without the CA, one of certificate and key without the
// other) or a file is unreadable.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> LoadChannelCredentials(
    const ChannelTlsFiles& files);

}  // namespace vtrain::common

#endif  // VTRAIN_COMMON_CREDENTIALS_H_
