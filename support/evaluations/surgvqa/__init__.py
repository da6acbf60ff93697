"""The SurgVU evaluation: surgical VQA (max sentence-BLEU) and tool detection (COCO mAP)."""
