#pragma once
// Public embedding header: the continuous-batching engine (see src/kvlm/engine/engine.h), the
// model it drives and the tokenizer that prepares its prompts.
#include "kvlm/engine/engine.h"
#include "kvlm/model/model.h"
#include "kvlm/text/tokenizer.h"
