"""ILFM link prediction on Kemp's nations data (14 countries, 56 relations).

20% of the observed entries are held out (masked, never zeros); the score of a held-out entry
is its posterior-mean link probability, and AUC-ROC is taken over all held-out entries."""

import jax
import numpy as np

import bnpjax
from bnpjax.datasets import nations
from bnpjax.metrics import roc_auc
from bnpjax.models import ilfm


def main():
    d = nations()  # Y (R, N, N) in {0, 1}, NaN where unknown; mask False on the diagonal
    observed = np.asarray(d.mask, bool)
    rng = np.random.default_rng(0)
    held = observed & (rng.random(observed.shape) < 0.2)
    data = ilfm.make_data(d.Y, mask=observed & ~held)
    idata = bnpjax.sample(ilfm.gibbs(data), jax.random.key(0), 400, num_warmup=200)
    p_held = ilfm.predict(idata, data, held)  # posterior-mean P(link) at the held-out entries
    auc = roc_auc(np.asarray(d.Y)[held], p_held)
    k_plus = idata.posterior["num_features"].values
    print(f"held-out AUC {auc:.4f} over {held.sum()} entries; K+ {k_plus.mean():.1f} on average")
    print(f"compile {idata.attrs['compile_s']:.1f} s, sampling {idata.attrs['sampling_s']:.1f} s")


if __name__ == "__main__":
    main()
