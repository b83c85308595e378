# The GPU data files' generator (cmake/gpu_table.cmake), run by CTest in script
# mode: the repository's files make a table in their "order", and a bad file
# stops generation with the file and the field named.
#   cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch> -P tests/cmake/gpu_table_test.cmake
cmake_minimum_required(VERSION 3.25)
include(${SOURCE_DIR}/cmake/gpu_table.cmake)
if(DEFINED GENERATE_DIR)  # one generation, in a child process (a failure ends it)
  vtrain_gpu_table(${WORK_DIR}/out.inc ${GENERATE_DIR})
  return()
endif()

# The repository's files: every GPU once, listed in "order" (v100 first).
vtrain_gpu_table(${WORK_DIR}/gpu_table.inc ${SOURCE_DIR}/data/gpus)
file(STRINGS ${WORK_DIR}/gpu_table.inc rows REGEX "^\\{\\.name = ")
list(LENGTH rows count)
file(GLOB files ${SOURCE_DIR}/data/gpus/*.json)
list(LENGTH files expected)
if(NOT count EQUAL expected)
  message(FATAL_ERROR "${count} rows for ${expected} GPU files")
endif()
list(GET rows 0 first)
if(NOT first MATCHES "^\\{\\.name = \"v100-sxm2-32gb\", \\.peak_fp16_flops_per_s = 125")
  message(FATAL_ERROR "the first row is not the V100's: ${first}")
endif()

# Each bad file is refused naming the file and what is wrong with it.
file(READ ${SOURCE_DIR}/data/gpus/h100-sxm5-80gb.json good)
function(expect_refused name text expected)
  set(dir ${WORK_DIR}/${name})
  file(REMOVE_RECURSE ${dir})
  file(WRITE ${dir}/h100-sxm5-80gb.json "${text}")
  execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${SOURCE_DIR} -DWORK_DIR=${dir}
                          -DGENERATE_DIR=${dir} -P ${CMAKE_CURRENT_LIST_FILE}
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  string(REGEX REPLACE "[ \n]+" " " err "${err}")
  if(rc EQUAL 0)
    message(FATAL_ERROR "${name}: accepted")
  endif()
  if(NOT err MATCHES "h100-sxm5-80gb.json" OR NOT err MATCHES "${expected}")
    message(FATAL_ERROR "${name}: the error does not say '${expected}': ${err}")
  endif()
endfunction()
string(REPLACE "\"num_sms\": 132," "" missing "${good}")
expect_refused(missing_field "${missing}" "datasheet.num_sms.*not found")
string(REPLACE "\"num_sms\": 132," "\"num_sms\": \"many\"," text "${good}")
expect_refused(string_number "${text}" "datasheet.num_sms must be a number")
string(REPLACE "\"name\": \"h100-sxm5-80gb\"" "\"name\": \"h100\"" text "${good}")
expect_refused(name_not_file "${text}" "name the file h100.json")
string(REPLACE "\"mx_block_scaling\": false" "\"mx_block_scaling\": 0" text "${good}")
expect_refused(bool_field "${text}" "mx_block_scaling\" must be true or false")
expect_refused(malformed "{\"name\": \"h100-sxm5-80gb\"," "failed parsing json")
message(STATUS "gpu_table_test: ${count} GPUs, 5 bad files refused")
