"""Makes a tiny causal language model on this machine, nothing from a hub: a byte-level BPE tokenizer trained on a
few sentences (every id decodes, as the model's vocabulary is exactly the tokenizer's) and a 2-layer Qwen2 with random
weights, saved with save_pretrained (config.json, model.safetensors, tokenizer.json, tokenizer_config.json with a chat
template). Deterministic: the same seed gives the same files.

Usage: python vllm-cpu-model.py OUT_DIR
"""
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Two Sparks make one vLLM endpoint.",
    "Hello, how are you today? I am fine, thank you.",
    "Ray starts a head and workers; vLLM serves the model.",
]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# The ChatML template Qwen2 models ship, reduced to plain text messages.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def main(out: str) -> None:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(SENTENCES, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(fast),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,  # head_dim 32: vLLM's CPU attention takes 32 (cpu_attn.py get_supported_head_sizes)
        num_key_value_heads=1,
        max_position_embeddings=2048,
        eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=fast.convert_tokens_to_ids("<|endoftext|>"),
        bos_token_id=None,
        tie_word_embeddings=True,
        torch_dtype="bfloat16",
    )
    model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    print(f"{out}: vocab {len(fast)}, {sum(p.numel() for p in model.parameters())} parameters")


if __name__ == "__main__":
    main(sys.argv[1])
