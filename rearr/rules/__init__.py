"""Stage 2, rules: IR -> Recipe, every rule that needs no shape (recipe.py), and the rules of the
layers' constructor arguments (layer_recipe.py). The library, the layers and `rearr check` share them."""
