"""Acting: the actor (policy runtime -> action selector -> adder), the one actor/environment
loop with its hooks, the variable clients that move (quantized) parameters to actors, and
bounded continuous action mapping."""
