// How `meshrl plan` shows a Plan: a side-by-side table (full weights vs adapter, per city) for
// people, one JSON object for scripts. Knows nothing about how the numbers were computed.
#pragma once

#include <string>

#include "plan/comm_plan.h"
#include "plan/plan_model.h"

namespace meshrl::plan {

std::string plan_table(const PlanModel& model, const PlanInputs& inputs, const Plan& plan);

// One object. The top-level keys describe the run as asked (the adapter when a LoRA rank is given,
// else full weights), with seconds_up / seconds_on_wire / steps_to_hide of the slowest city:
//   full_params, trainable_params, exchanged_params, bytes_up_per_round, bytes_down_per_round,
//   seconds_up, seconds_on_wire, steps_to_hide, mode, codec, step_seconds,
// then "params" (the breakdown), "full" and "lora" (each: the ExchangePlan and its "cities"), "notes".
std::string plan_json(const PlanModel& model, const PlanInputs& inputs, const Plan& plan);

}  // namespace meshrl::plan
