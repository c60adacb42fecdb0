// placeholder: implemented by the tokenizer work
