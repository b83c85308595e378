// The conversion library between core types and vtrain.v1 messages, by
// message family; the only code that sees both worlds (server, client and
// agent share it). Include the header of the family you need.
#ifndef VTRAIN_PROTO_CONVERT_H_
#define VTRAIN_PROTO_CONVERT_H_

#include "proto/curve_convert.h"
#include "proto/enum_convert.h"
#include "proto/job_convert.h"
#include "proto/json.h"
#include "proto/model_design_convert.h"
#include "proto/prediction_convert.h"
#include "proto/presets_convert.h"
#include "proto/profile_set_convert.h"
#include "proto/search_convert.h"
#include "proto/vtrain_config.h"

#endif  // VTRAIN_PROTO_CONVERT_H_
