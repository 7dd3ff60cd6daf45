"""Published numbers that the records commands set beside ours: the TCNLM paper's (Wang et
al. 2018, "Topic Compositional Neural Language Model") Tables 2 and 6 (test perplexity) and
Table 4 (topic coherence), keyed by our dataset and preset names and by ``evaluate.compare``
row, and the SDLM paper's (Gu et al. 2018) Table 1 for the People's Daily baseline.

Table 2's basic-LSTM, LDA+LSTM, LCLM and TDLM numbers and Table 4's LDA, NTM and TDLM
numbers are the TDLM paper's (Lau et al. 2017), as the TCNLM paper marks them. Table 4's
coherence is NPMI averaged over the top 5/10/15/20 words of each topic and over topics,
with English Wikipedia as the reference corpus (sliding window).
"""
from __future__ import annotations

from evaluate.compare_report import SENTENCE_LSTM

#: Table 2 of the TCNLM paper, (dataset, preset) -> the paper's model -> test perplexity,
#: a number for the models without topics, {T: number} for the topic models
TABLE_2: dict[tuple[str, str], dict[str, float | dict[int, float]]] = {
    ("apnews", "small"): {
        "basic-LSTM": 64.13, "LDA+LSTM": {50: 57.05, 100: 55.52, 150: 54.83}, "LCLM": 54.18,
        "Topic-RNN": {50: 56.77, 100: 54.54, 150: 54.12},
        "TDLM": {50: 53.00, 100: 52.75, 150: 52.65},
        "TCNLM": {50: 52.75, 100: 52.63, 150: 52.59}},
    ("apnews", "large"): {
        "basic-LSTM": 58.89, "LDA+LSTM": {50: 52.72, 100: 50.75, 150: 50.17}, "LCLM": 50.63,
        "Topic-RNN": {50: 53.19, 100: 50.24, 150: 50.01},
        "TDLM": {50: 48.96, 100: 48.97, 150: 48.21},
        "TCNLM": {50: 48.07, 100: 47.81, 150: 47.74}},
    ("imdb", "small"): {
        "basic-LSTM": 72.14, "LDA+LSTM": {50: 69.58, 100: 69.64, 150: 69.62}, "LCLM": 67.78,
        "Topic-RNN": {50: 68.74, 100: 67.83, 150: 66.45},
        "TDLM": {50: 63.67, 100: 63.45, 150: 63.82},
        "TCNLM": {50: 63.98, 100: 62.64, 150: 62.59}},
    ("imdb", "large"): {
        "basic-LSTM": 66.47, "LDA+LSTM": {50: 63.48, 100: 63.04, 150: 62.78}, "LCLM": 67.86,
        "Topic-RNN": {50: 63.02, 100: 61.59, 150: 60.14},
        "TDLM": {50: 58.99, 100: 59.04, 150: 58.59},
        "TCNLM": {50: 57.06, 100: 56.38, 150: 56.12}},
    ("bnc", "small"): {
        "basic-LSTM": 102.89, "LDA+LSTM": {50: 96.42, 100: 96.50, 150: 96.38}, "LCLM": 87.47,
        "Topic-RNN": {50: 94.66, 100: 93.57, 150: 93.55},
        "TDLM": {50: 87.42, 100: 85.99, 150: 86.43},
        "TCNLM": {50: 87.98, 100: 86.44, 150: 86.21}},
    ("bnc", "large"): {
        "basic-LSTM": 94.23, "LDA+LSTM": {50: 88.42, 100: 87.77, 150: 87.28}, "LCLM": 80.68,
        "Topic-RNN": {50: 85.90, 100: 84.62, 150: 84.12},
        "TDLM": {50: 82.62, 100: 81.83, 150: 80.58},
        "TCNLM": {50: 80.29, 100: 80.14, 150: 80.12}},
}
#: Table 2's name of each ``evaluate.compare`` row it has; the other rows (the
#: document-level LSTM, the ablations, the decoders) are not in Table 2
TABLE_2_ROWS = {SENTENCE_LSTM: "basic-LSTM", "lda_lstm": "LDA+LSTM", "lclm": "LCLM",
              "topic_rnn": "Topic-RNN", "tdlm": "TDLM", "tcnlm": "TCNLM"}
#: Table 6 of the TCNLM paper: test perplexity of the authors' own basic LSTM, naive MoE
#: (eq. 7-8) and TCNLM, all 1x100 LSTMs with 30 topics (its one table of rows trained in one
#: codebase), dataset -> our row -> value
TABLE_6: dict[str, dict[str, float]] = {
    "apnews": {SENTENCE_LSTM: 101.62, "moe": 85.87, "tcnlm": 82.67},
    "imdb": {SENTENCE_LSTM: 105.29, "moe": 96.16, "tcnlm": 94.64},
    "bnc": {SENTENCE_LSTM: 146.50, "moe": 130.01, "tcnlm": 125.09},
}
#: Table 4 of the TCNLM paper, dataset -> T -> the paper's model -> NPMI; "(s)" and "(l)"
#: are its small and large models (LDA and NTM have no size)
TABLE_4: dict[str, dict[int, dict[str, float]]] = {
    "apnews": {
        50: {"LDA": 0.125, "NTM": 0.075, "TDLM(s)": 0.149, "TDLM(l)": 0.130,
             "Topic-RNN(s)": 0.134, "Topic-RNN(l)": 0.127, "TCNLM(s)": 0.159, "TCNLM(l)": 0.152},
        100: {"LDA": 0.136, "NTM": 0.085, "TDLM(s)": 0.152, "TDLM(l)": 0.142,
              "Topic-RNN(s)": 0.158, "Topic-RNN(l)": 0.143, "TCNLM(s)": 0.160,
              "TCNLM(l)": 0.152},
        150: {"LDA": 0.134, "NTM": 0.078, "TDLM(s)": 0.147, "TDLM(l)": 0.145,
              "Topic-RNN(s)": 0.146, "Topic-RNN(l)": 0.137, "TCNLM(s)": 0.153,
              "TCNLM(l)": 0.155}},
    "imdb": {
        50: {"LDA": 0.084, "NTM": 0.064, "TDLM(s)": 0.104, "TDLM(l)": 0.088,
             "Topic-RNN(s)": 0.103, "Topic-RNN(l)": 0.096, "TCNLM(s)": 0.106, "TCNLM(l)": 0.100},
        100: {"LDA": 0.092, "NTM": 0.071, "TDLM(s)": 0.087, "TDLM(l)": 0.097,
              "Topic-RNN(s)": 0.096, "Topic-RNN(l)": 0.093, "TCNLM(s)": 0.101,
              "TCNLM(l)": 0.098},
        150: {"LDA": 0.094, "NTM": 0.075, "TDLM(s)": 0.085, "TDLM(l)": 0.091,
              "Topic-RNN(s)": 0.089, "Topic-RNN(l)": 0.092, "TCNLM(s)": 0.096,
              "TCNLM(l)": 0.093}},
    "bnc": {
        50: {"LDA": 0.106, "NTM": 0.081, "TDLM(s)": 0.102, "TDLM(l)": 0.095,
             "Topic-RNN(s)": 0.102, "Topic-RNN(l)": 0.100, "TCNLM(s)": 0.114, "TCNLM(l)": 0.101},
        100: {"LDA": 0.119, "NTM": 0.070, "TDLM(s)": 0.106, "TDLM(l)": 0.101,
              "Topic-RNN(s)": 0.108, "Topic-RNN(l)": 0.105, "TCNLM(s)": 0.111,
              "TCNLM(l)": 0.104},
        150: {"LDA": 0.119, "NTM": 0.072, "TDLM(s)": 0.100, "TDLM(l)": 0.104,
              "Topic-RNN(s)": 0.102, "Topic-RNN(l)": 0.097, "TCNLM(s)": 0.107,
              "TCNLM(l)": 0.102}},
}
#: Table 4's name of each topic row it has (LDA+LSTM's topics are LDA's), sized by the
#: preset where the paper trained both sizes
TABLE_4_ROWS = {"tcnlm": "TCNLM", "tdlm": "TDLM", "topic_rnn": "Topic-RNN", "lda_lstm": "LDA"}
#: our presets by Table 4's size marks
SIZE_MARKS = {"small": "(s)", "large": "(l)"}


def table_4_npmi(row: str, dataset: str, preset: str, topics: int) -> float | None:
    """Table 4's NPMI for our ``row`` (an ``evaluate.compare`` row) on ``dataset`` with
    ``preset``-sized models at ``topics`` topics, or None where the paper has no cell."""
    name = TABLE_4_ROWS.get(row)
    cells = TABLE_4.get(dataset, {}).get(topics, {})
    if name is None or preset not in SIZE_MARKS:
        return None
    return cells.get(name + SIZE_MARKS[preset], cells.get(name))


#: Table 1 of the SDLM paper (Gu et al. 2018, "Language Modeling with Sparse Product of
#: Sememe Experts"), People's Daily, the medium tied rows: validation and test perplexity of
#: the tied two-layer 650-unit LSTM (the PyTorch ``word_language_model`` example, the
#: authors' baseline) and of it with the MoS and the SDLM (HowNet) decoders
SDLM_TABLE_1: dict[str, dict[str, float]] = {
    "Tied LSTM (medium)": {"valid": 105.35, "test": 104.67},
    "+ MoS": {"valid": 98.47, "test": 98.12},
    "+ SDLM": {"valid": 97.75, "test": 97.32},
}
