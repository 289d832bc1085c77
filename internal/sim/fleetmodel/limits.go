package fleetmodel

// The bounds of a driven request (workload none). The engines' own:
//   - n from 1 to maxN, as vLLM's SamplingParams._verify_args (_verify_num_sequences) takes it;
//   - max_tokens at least 1 (vLLM's _verify_args; SGLang's CompletionRequest wants it positive),
//     and on vLLM at most max_model_len (vllm/renderers/params.py, TokenizeParams);
//   - each prompt and its max_tokens within the model length: on vLLM prompt + max_tokens <=
//     max_model_len (TokenizeParams' input length check, param input_tokens); on SGLang the
//     prompt below the context length and prompt + max_new_tokens below it too
//     (TokenizerManager._validate_one_request, python/sglang/srt/managers/tokenizer_manager.py).
//
// And the simulator's, which keep what one request may hold bounded: the simulator keeps every
// sample of a request, and the request's body and prompts, until it answers the whole request.
//   - at most maxRequestSamples samples (n times the prompts);
//   - at most requestModelLens model lengths of tokens, each sample's prompt plus max_tokens
//     summed over the samples;
//   - a body of at most maxBody(max model len) bytes: the bytes of that many tokens as text or
//     token ids.
//
// So a request holds O(maxRequestSamples + requestModelLens × max model len) memory, whatever it
// asks for, and 200 concurrent clients hold 200 times that (TestDrivenMemoryBounded).

// maxN is vLLM's largest n: VLLM_MAX_N_SEQUENCES's default (vllm/envs.py).
const MaxN = 16384
