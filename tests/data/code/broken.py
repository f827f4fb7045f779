import os


def before(a, b):
    return a + b


class Config:
    def load(self, path):
        with open(path) as f:
            return f.read(

    def save(self, path, data):
        with open(path, "w") as f:
            f.write(data)


def after_error(x):
    return x * 2
