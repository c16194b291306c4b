"""The examples of the two seed documents (../shared/seeds/), as runnable
functions. Each returns what the document prints, as (label, value) pairs;
the demo prints them and the tests compare them with the documents' numbers.

The code inside each function is the document's code unchanged apart from
`import tensorflow as tf` -> `import jitgrad as tf`, Python 2 `print x` ->
`print(x)` and plotting removed.
"""
