// Model op lists (include/opcache/model.hpp, api/model.cpp).
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "opcache/model.hpp"

using opcache::ErrorCode;
using opcache::parse_model_op_list;

TEST_CASE("api::parse_model_op_list returns the ops in order, names split off the descriptors") {
  auto model = parse_model_op_list(R"({"name": "tiny", "description": "d", "source": "s",
      "ops": [{"name": "fc1", "op_type": "MatMul", "attrs": {"k": 1}}, {"op_type": "Relu"}]})",
                                   "tiny.json");
  REQUIRE(model);
  CHECK(model->name == "tiny");
  CHECK(model->description == "d");
  REQUIRE(model->ops.size() == 2);
  CHECK(model->ops[0].name == "fc1");
  CHECK(nlohmann::json::parse(model->ops[0].descriptor_json) ==
        nlohmann::json::parse(R"({"op_type": "MatMul", "attrs": {"k": 1}})"));
  CHECK(model->ops[1].name.empty());
  CHECK(model->ops[1].descriptor_json == R"({"op_type":"Relu"})");
}

TEST_CASE("api::parse_model_op_list is strict and names the file, member or op") {
  struct Case {
    const char* text;
    const char* message_part;
  };
  const Case cases[] = {
      {"[1, 2]", "m.json: a model is an object"},
      {R"({"name": "x"})", "m.json: a model is an object"},
      {R"({"ops": {}})", "m.json: a model is an object"},
      {R"({"ops": []})", "m.json: the model has no ops"},
      {R"({"ops": [{"op_type": "A"}], "layers": 3})", "unknown model member \"layers\""},
      {R"({"ops": [{"op_type": "A"}], "name": 3})", "model member \"name\" must be a string"},
      {R"({"ops": [{"op_type": "A"}, 7]})", "m.json: ops[1]: an op is a descriptor object"},
      {R"({"ops": [{"op_type": "A", "name": 1}]})", "m.json: ops[0]: \"name\" must be a string"},
      {R"({"ops": [{"op_type": "A"}]} x)", "m.json"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    auto model = parse_model_op_list(c.text, "m.json");
    REQUIRE_FALSE(model);
    CHECK(model.error().code() == ErrorCode::usage);
    CHECK(model.error().message().find(c.message_part) != std::string::npos);
  }
}
